#!/usr/bin/env bash
# Fetches, as .deb files in .devkit/, the Debian libraries bertft's build needs besides LibTorch,
# for a machine that has none of them and cannot fetch them: a lent GPU machine, whose Python
# package brings a CUDA LibTorch (and fmt's headers). scripts/device_check.sh unpacks them there.
# Also copies ../shared's fixtures, data and HF export check into .devkit/shared for the tests there.
#   scripts/device_kit.sh     # here; then carry .devkit to the GPU machine
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
kit="$root/.devkit"
mkdir -p "$kit"
cd "$kit"
# No libfmt-dev: the LibTorch there ships fmt's headers, which its own headers include first.
apt-get download \
  libyaml-cpp-dev libyaml-cpp0.7 nlohmann-json3-dev libcli11-dev \
  libsentencepiece-dev libsentencepiece0 libutf8proc-dev libutf8proc2 \
  libgtest-dev pkgconf pkgconf-bin libpkgconf3 >&2
# ../shared (the HF fixture, the datasets) does not travel with the checkout: a copy for the
# tests there, never committed (.devkit is ignored).
if [ -d "$root/../shared/fixtures" ]; then
  rm -rf "$kit/shared"
  mkdir -p "$kit/shared"
  cp -r "$root/../shared/fixtures" "$root/../shared/data" "$kit/shared/"
  # The HF export check for the tests, perf_bert.py for the cpubench stage, where that machine
  # has transformers.
  mkdir -p "$kit/shared/tools/hf-reference"
  cp "$root/../shared/tools/hf-reference/hf_export_check.py" \
    "$root/../shared/tools/hf-reference/perf_bert.py" "$kit/shared/tools/hf-reference/"
fi
ls -1 "$kit"
