#!/usr/bin/env bash
# Fuzzes bertft's parsers with libFuzzer under ASan + UBSan (fuzz/README.md).
#   scripts/fuzz.sh                    every target, 60 s each
#   scripts/fuzz.sh torch_pickle 1800  one target for 30 minutes
#   scripts/fuzz.sh all 600 -runs=1000000   extra arguments go to libFuzzer
#   BERTFT_FUZZ_SANITIZERS=undefined scripts/fuzz.sh tokenizer_dir 300
#                                      UBSan alone, in build-fuzz-undefined/ (ASan's runtime
#                                      refuses the SentencePiece module's RTLD_DEEPBIND dlopen)
# Builds with clang in build-fuzz/ (installing clang and its fuzzer runtime from Debian when
# missing), writes the seed corpora, and keeps each target's growing corpus in
# build-fuzz/corpus/<target>. Crashes land in build-fuzz/findings/<target>/; the summary line
# of each run (executions, corpus size, crashes) goes to build-fuzz/fuzz-summary.txt.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
target="${1:-all}"
seconds="${2:-60}"
shift $(( $# > 2 ? 2 : $# ))
sanitizers="${BERTFT_FUZZ_SANITIZERS:-address,undefined}"
build="$root/build-fuzz"
[ "$sanitizers" = "address,undefined" ] || build="$root/build-fuzz-${sanitizers//,/-}"

missing=()
for pkg in clang-14 libclang-rt-14-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -f "$build/build.ninja" ]; then
  CXX=clang++-14 cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DBERTFT_FUZZ=ON -DBERTFT_FUZZ_SANITIZERS="$sanitizers" -DBERTFT_BUILD_TESTS=OFF \
    -DBERTFT_BUILD_BENCH=OFF >&2
fi
targets=$(sed -n '/^set(BERTFT_FUZZ_TARGETS/,/PARENT_SCOPE)/p' "$root/fuzz/CMakeLists.txt" |
  grep -v 'set(\|PARENT_SCOPE' | tr -s ' \n' ' ')
[ "$target" = all ] || targets="$target"
cmake --build "$build" -j "$(nproc)" --target bertft_fuzz_seeds $(printf 'fuzz_%s ' $targets) >&2
"$build/fuzz/bertft_fuzz_seeds" "$root" "$build/seeds"

# LibTorch's own start-up allocations are not the targets' leaks.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$root/fuzz/lsan.supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
for t in $targets; do
  corpus="$build/corpus/$t"
  findings="$build/findings/$t"
  mkdir -p "$corpus" "$findings"
  cp -n "$build/seeds/$t"/* "$corpus/" 2>/dev/null || true
  [ -d "$root/fuzz/regressions/$t" ] && cp -n "$root/fuzz/regressions/$t"/* "$corpus/" || true
  echo "[fuzz] $t: ${seconds}s" >&2
  log="$build/findings/$t.log"
  status=0
  # 4 GiB of memory at most, 10 s an input at most, as the issue's limits say.
  "$build/fuzz/fuzz_$t" "$corpus" -max_total_time="$seconds" -rss_limit_mb=4096 \
    -malloc_limit_mb=4096 -timeout=10 -artifact_prefix="$findings/" -print_final_stats=1 \
    "$@" >"$log" 2>&1 || status=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  size=$(ls "$corpus" | wc -l)
  crashes=$(ls "$findings" | wc -l)
  echo "$(date -u +%F) $t: $runs executions, corpus $size, findings $crashes, exit $status" |
    tee -a "$build/fuzz-summary.txt" >&2
done
