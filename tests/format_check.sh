#!/usr/bin/env bash
# The tree matches the project's .clang-format: every C++ source under the layer folders, tests/
# and bench/ (clang-format 14, Debian 12's; skipped with exit 77 where no clang-format 14 is).
set -euo pipefail
root="$1"
tool=""
for candidate in clang-format-14 clang-format; do
  if command -v "$candidate" >/dev/null && "$candidate" --version | grep -q "version 14\."; then
    tool="$candidate"
    break
  fi
done
if [ -z "$tool" ]; then
  echo "format check skipped: clang-format 14 not found (scripts/setup.sh installs it)"
  exit 77
fi
cd "$root"
mapfile -t files < <(find bert data tasks recipes tests bench -name '*.cpp' -o -name '*.h' | sort)
if ! "$tool" --style=file --dry-run --Werror "${files[@]}" 2>/tmp/bertft-format.$$; then
  grep -E '^[^ ].*: error:' /tmp/bertft-format.$$ | sed -E 's/:[0-9]+:[0-9]+: error:.*//' | sort -u |
    sed 's/^/not formatted: /'
  echo "run: $tool -i <files>   (or: git ls-files '*.cpp' '*.h' | xargs $tool -i)"
  rm -f /tmp/bertft-format.$$
  exit 1
fi
rm -f /tmp/bertft-format.$$
echo "format ok: ${#files[@]} files"
