#!/usr/bin/env bash
# Installs the Debian packages bertft needs (only those missing), then configures and builds a
# Release tree in build/. Safe to run repeatedly: a second run only rebuilds what changed.
#   scripts/setup.sh            # install + configure + build
#   BERTFT_SKIP_BUILD=1 scripts/setup.sh   # install packages (and the npm test reference) only
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BERTFT_BUILD_DIR:-$root/build}"

packages=(
  build-essential cmake ninja-build pkg-config
  libtorch-dev libopenblas0-pthread libgloo-dev libdnnl-dev
  libsentencepiece-dev libyaml-cpp-dev libfmt-dev libgtest-dev
  nlohmann-json3-dev libutf8proc-dev libcli11-dev
  clang-format
)
# Node.js runs the HF tokenizer reference in the tests; keep a machine's own node if it has one.
command -v npm >/dev/null || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[setup] installing: ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# LibTorch calls whatever libblas.so.3 is selected; make sure it is OpenBLAS, not the reference BLAS.
blas_alt="/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"
if [ -e "$blas_alt" ] && command -v update-alternatives >/dev/null; then
  current="$(update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | awk '/^Value:/{print $2}')"
  if [ "$current" != "$blas_alt" ]; then
    sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" update-alternatives --set libblas.so.3-x86_64-linux-gnu "$blas_alt" >/dev/null
  fi
fi

# Hugging Face's own tokenizer (Rust core, Node binding) from npm: the reference that the
# tokenizer tests compare against. Tests skip the comparison cleanly if this step failed.
npm_dir="$build_dir/npm"
if [ ! -d "$npm_dir/node_modules/tokenizers" ] && command -v npm >/dev/null; then
  mkdir -p "$npm_dir"
  cp "$root/tools/hf_tokenizer_ref/package.json" "$npm_dir/package.json"
  (cd "$npm_dir" && npm install --no-audit --no-fund --loglevel=error >&2) ||
    echo "[setup] warning: npm install of the HF tokenizer reference failed; its test will skip" >&2
fi

# Hugging Face transformers (Python, Debian's python3-torch) where ../shared has its reference
# kit: the tests load bertft's exports with it (tests/recipes/hf_export_test.cpp). Never part
# of bertft; where it is absent or its set-up fails, those tests skip.
hf_kit="$root/../shared/tools/hf-reference/setup.sh"
if [ -x "$hf_kit" ] && [ ! -x "$build_dir/hf-reference/python" ]; then
  "$hf_kit" "$build_dir/hf-reference" >&2 ||
    echo "[setup] warning: the HF reference set-up failed; the HF export tests will skip" >&2
fi

[ "${BERTFT_SKIP_BUILD:-0}" = 1 ] && exit 0

if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
fi
cmake --build "$build_dir" -j "$(nproc)" >&2
