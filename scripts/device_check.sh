#!/usr/bin/env bash
# The checks that need a GPU, on a lent GPU machine (the device tool): builds bertft against the
# LibTorch of the machine's Python package (PyTorch 2.x with CUDA; no Debian packages there, so
# scripts/device_kit.sh's .deb files, carried as .devkit, are unpacked first), then
#   1. the quickstart's training on CPU with that LibTorch (the first checkpoint included);
#   2. the tasks' and the encoder's tests on CPU with that LibTorch (stage tests), then the
#      Trainer's (resume included), NCCL's and the task heads' HF parity (forward, loss and
#      gradients) on CUDA (BERTFT_TEST_DEVICE=cuda; stage cudatests);
#      stage ctest, not run by default, runs the whole suite on that LibTorch
#      (BERTFT_DEVICE_TARGETS=all to build it);
#   3. the quickstart task trained on CUDA in fp32, bf16 and fp16;
#   4. inference on CUDA against CPU: predict (the exported model, with logits), fill-mask and
#      next-sentence prediction on raw text (the quickstart's pre-training model), embed;
#   5. (stage cudacli) the command-line tests of every head's predictions, embed and the
#      end-to-end chains with their predict/embed/similar on CUDA (BERTFT_TEST_DEVICE=cuda; the
#      tests compare with the data path, with HF's recorded answers and with CPU runs);
#   6. (stage cpubench, not run by default) bench_suite's gemm and vs_hf sections on the
#      machine's CPU at 2 threads against its own transformers (bf16 where that CPU has AMX).
# ../shared does not travel: scripts/device_kit.sh copies its fixtures and data into
# .devkit/shared, which the tests read here (BERTFT_SHARED).
# A crash is rerun under cuda-gdb for its backtrace. Logs go to $OUT (the device tool's folder)
# or build-device/out. Usage, on that machine: scripts/device_check.sh [stage ...] (default all).
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BERTFT_DEVICE_BUILD:-$root/build-device}"
out="${OUT:-$build/out}"
mkdir -p "$out"
stages="${*:-build cpu tests cudatests cuda infer cudacli}"
[ -d "$root/.devkit/shared/fixtures" ] && export BERTFT_SHARED="$root/.devkit/shared"
exec > >(tee -a "$out/check.log") 2>&1
say() { echo "[device +${SECONDS}s] $*"; }
has_stage() { [[ " $stages " == *" $1 "* ]]; }
export OMP_WAIT_POLICY=PASSIVE  # bertft's load-time setting, so it does not re-execute itself

# A command that died of a signal runs again under cuda-gdb for where.
backtrace_of() {
  command -v cuda-gdb >/dev/null || return 0
  say "backtrace: $*"
  timeout 240 cuda-gdb -q -batch -ex 'set pagination off' -ex run -ex bt -ex 'x/6a $sp' \
    --args "$@" 2>&1 | grep -v '^\[New Thread\|^\[Thread .* exited\|^\[Detaching' | tail -60
}
# The machine's Python as the HF kit (BERTFT_HF_PYTHON) where it has transformers and none is
# set; its versions in the log.
use_machine_hf() {
  [ -z "${BERTFT_HF_PYTHON:-}" ] && python3 -c 'import transformers' 2>/dev/null || return 0
  export BERTFT_HF_PYTHON="$(command -v python3)"
  say "HF kit: $(python3 -c 'import transformers, torch; print("transformers", transformers.__version__, "torch", torch.__version__)')"
}
# run_or_trace LINES COMMAND...: runs it (output in $out/runs.log), shows its last LINES lines.
run_or_trace() {
  local lines=$1
  shift
  echo "### $*" >>"$out/runs.log"
  "$@" >"$build/last_run.log" 2>&1
  local rc=$?
  cat "$build/last_run.log" >>"$out/runs.log"
  tail -n "$lines" "$build/last_run.log"
  say "rc=$rc: ${*:1:4} ..."
  if ((rc > 128)); then backtrace_of "$@"; fi
  return $rc
}

if has_stage build; then
  say "machine: $(nvidia-smi -L 2>&1 | head -1); $(nproc) cores; $(g++ --version | head -1)"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())'
  torch_prefix="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')"
  for deb in "$root"/.devkit/*.deb; do
    case "$(basename "$deb")" in
      pkgconf* | libpkgconf*) command -v pkg-config >/dev/null && continue ;;
    esac
    dpkg -x "$deb" /
  done
  ldconfig
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS=-g1 \
    -DCMAKE_PREFIX_PATH="$torch_prefix" -DBERTFT_BUILD_BENCH="$(has_stage cpubench && echo ON || echo OFF)" \
    -DTORCH_CUDA_ARCH_LIST=9.0 >"$out/configure.log" 2>&1 || {
    tail -40 "$out/configure.log"
    exit 1
  }
  grep -E "fmt|oneDNN|Torch|CUDA" "$out/configure.log" | head
  # BERTFT_DEVICE_TARGETS: what to build (default: the program, the tasks', the encoder's and
  # the recipes' tests).
  ninja -C "$build" -k 0 ${BERTFT_DEVICE_TARGETS:-bertft tasks_tests bert_tests recipes_tests} \
    >"$out/build.log" 2>&1
  say "build rc=$?"
  grep -B2 -A12 -E "error:|FAILED" "$out/build.log" | head -120
  # pytorch/pytorch#133437: bertft removes trees with nftw (bert::remove_tree) because of these.
  echo "std::filesystem symbols LibTorch exports: $(nm -D --defined-only \
    "$(dirname "$torch_prefix")/../lib/libtorch_cpu.so" 2>/dev/null | grep -c '_ZNSt10filesystem')"
fi
bertft="$build/bertft"
qs="$build/qs"

if has_stage cpu && [ -x "$bertft" ]; then
  rm -rf "$qs" "$build/run-cpu"
  # The quickstart writes its data, model and recipe, then sweeps; its own trials run on CPU.
  run_or_trace 25 "$bertft" quickstart --out "$qs" --jobs 4
  run_or_trace 8 "$bertft" train "$qs/recipe.yaml" --out "$build/run-cpu" \
    --set training.epochs=2 --set training.learning_rate=1e-3
fi

if has_stage ctest && [ -x "$build/tests/tasks_tests" ]; then  # all of it: not by default
  (cd "$build" && timeout 420 ctest -j 8 --timeout 240 --output-on-failure >"$out/ctest.log" 2>&1)
  say "ctest rc=$?"
  grep -E "tests passed|^\s+[0-9]+ - |Test #.*(Failed|Exception|Timeout)" "$out/ctest.log" | head -60
fi

if has_stage tests && [ -x "$build/tests/tasks_tests" ]; then
  # The Trainer's, optimizer's and tasks' tests on CPU with that LibTorch, then (cudatests) on
  # CUDA: there the Trainer's resume test stops a CUDA run after a checkpoint and resumes it,
  # bit for bit.
  timeout 300 "$build/tests/tasks_tests" --gtest_brief=1 >"$out/cpu_tests.log" 2>&1
  say "tasks_tests on CPU: rc=$?"
  grep -E "^\[  (FAILED|PASSED) |Failure|rror" "$out/cpu_tests.log" | head -30
  tail -3 "$out/cpu_tests.log"
  if [ -x "$build/tests/bert_tests" ]; then  # the encoder's, the allocator's included
    timeout 200 "$build/tests/bert_tests" --gtest_brief=1 >"$out/bert_tests.log" 2>&1
    say "bert_tests on CPU: rc=$?"
    grep -E "^\[  FAILED |Failure" "$out/bert_tests.log" | head -20
    tail -3 "$out/bert_tests.log"
  fi
fi

if has_stage cudatests && [ -x "$build/tests/tasks_tests" ]; then
  BERTFT_TEST_DEVICE=cuda timeout 300 "$build/tests/tasks_tests" \
    --gtest_filter='TrainerTest.*:DataParallelTest.Nccl*:HeadParityTest.*' >"$out/cuda_tests.log" 2>&1
  rc=$?
  say "tasks_tests on CUDA: rc=$rc"
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |OK \]|Failure|rror" "$out/cuda_tests.log" | head -40
  tail -3 "$out/cuda_tests.log"
  if ((rc > 128)); then
    BERTFT_TEST_DEVICE=cuda backtrace_of "$build/tests/tasks_tests" \
      --gtest_filter='TrainerTest.*:DataParallelTest.Nccl*:HeadParityTest.*'
  fi
fi

if has_stage cuda && [ -x "$bertft" ] && [ -f "$qs/recipe.yaml" ]; then
  for precision in fp32 bf16 fp16; do
    rm -rf "$build/run-$precision"
    run_or_trace 3 "$bertft" train "$qs/recipe.yaml" --out "$build/run-$precision" \
      --set training.device=cuda --set training.precision=$precision \
      --set training.epochs=4 --set training.learning_rate=1e-3
    grep -h '"main"' "$build/run-$precision/result.json"
  done
fi
# The same inference on CPU and CUDA; compare_runs says how far apart they are (fp32 on both).
compare_runs() {
  python3 - "$@" <<'PY'
import json, sys
kind, a, b = sys.argv[1:4]
def rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
ra, rb = rows(a), rows(b)
assert len(ra) == len(rb) and ra, f"{len(ra)} vs {len(rb)} rows"
worst, differ = 0.0, 0
for x, y in zip(ra, rb):
    if kind == "embed":
        worst = max([worst] + [abs(p - q) for p, q in zip(x["embedding"], y["embedding"])])
    elif kind == "predict":
        differ += x["label"] != y["label"]
        worst = max([worst] + [abs(p - q) for p, q in zip(x["logits"], y["logits"])])
    else:  # fill-mask: each mask's candidates by token id, the NSP probability
        for ca, cb in zip(x["masks"], y["masks"]):
            sb = {c["token"]: c["score"] for c in cb}
            differ += ca[0]["token"] != cb[0]["token"]
            worst = max([worst] + [abs(c["score"] - sb[c["token"]]) for c in ca if c["token"] in sb])
        if "next_sentence" in x:
            worst = max(worst, abs(x["next_sentence"]["score"] - y["next_sentence"]["score"]))
print(f"{kind}: {len(ra)} rows, {differ} different answers, largest difference {worst:.2e}")
sys.exit(0 if worst < 1e-3 else 1)
PY
}

if has_stage infer && [ -x "$bertft" ] && [ -d "$qs/model" ]; then
  best="$qs/best_model"; [ -d "$best" ] || best=""
  cut -f1 "$qs/data/test.tsv" | tail -n +2 | head -40 >"$build/texts.txt"
  # Each text's second word masked; every third line also a pair (next-sentence prediction).
  awk -F' ' '{ $2 = "[MASK]"; line = $0; getline nxt; if (NR % 3 == 0) line = line "\t" nxt;
    print line }' "$build/texts.txt" >"$build/masked.txt"
  for device in cpu cuda; do
    if [ -n "$best" ]; then
      run_or_trace 2 "$bertft" predict --model "$best" --data "$qs/data/test.tsv" --logits \
        --device $device --out "$build/predict-$device.jsonl"
    fi
    run_or_trace 2 "$bertft" predict --model "$qs/model" --text - --top-k 5 --device $device \
      --out "$build/fill-$device.jsonl" <"$build/masked.txt"
    run_or_trace 2 "$bertft" embed --model "$qs/model" --data "$build/texts.txt" --pooling mean \
      --device $device --out "$build/embed-$device.jsonl"
  done
  [ -n "$best" ] && compare_runs predict "$build"/predict-{cpu,cuda}.jsonl
  compare_runs fill-mask "$build"/fill-{cpu,cuda}.jsonl
  compare_runs embed "$build"/embed-{cpu,cuda}.jsonl
  head -c 600 "$build/fill-cuda.jsonl"
  # bf16 on CUDA: runs, and its labels against fp32's (differences are bf16's rounding).
  run_or_trace 2 "$bertft" predict --model "$qs/model" --text - --device cuda --precision bf16 \
    --out "$build/fill-bf16.jsonl" <"$build/masked.txt"
  [ -n "$best" ] && run_or_trace 2 "$bertft" predict --model "$best" --data "$qs/data/test.tsv" \
    --device cuda --precision bf16 --out "$build/predict-bf16.jsonl"
fi
if has_stage cudacli && [ -x "$build/tests/recipes_tests" ]; then
  # Every predict/embed/similar these tests run gets --device cuda (tests/support's
  # on_test_device); their training stays on the recipes' CPU. Where the machine's Python has
  # transformers, the tests that compare with HF (its NER pipeline, loading the exports) run
  # with it as the HF kit (BERTFT_HF_PYTHON); its version is in the log.
  use_machine_hf
  (cd "$build" && BERTFT_TEST_DEVICE=cuda timeout 300 ctest -j 12 --timeout 240 \
    --output-on-failure -R \
    '^(PipelineTest|EmbedTest|EndToEndTest|PretrainingEndToEnd|CliTest|ToyTask|[A-Za-z]+/(FamilyEndToEndTest|HfExportTest))\.' \
    >"$out/cudacli.log" 2>&1)
  say "command-line tests with inference on CUDA: rc=$?"
  grep -E "tests passed|\*\*\*(Failed|Exception|Timeout)|Failure" "$out/cudacli.log" | head -40
fi
if has_stage cpubench && [ -x "$build/bench/bench_suite" ]; then
  # Not a GPU check: issue 16's bf16 targets on this machine's CPU where it runs bf16 fast (an
  # Intel Xeon with AMX on the lent H200s; the development machine's kinds have had none):
  # bench_suite's gemm and vs_hf sections at 2 threads, bertft against the machine's
  # transformers (bench/hf_perf_compat.py runs perf_bert.py there) on the same LibTorch, fresh
  # processes, interleaved. Build with BERTFT_DEVICE_TARGETS="bertft bench_suite".
  use_machine_hf
  say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); $(grep -o -m1 -w amx_bf16 /proc/cpuinfo) $(grep -o -m1 -w avx512_bf16 /proc/cpuinfo)"
  (cd "$root" && timeout "${BERTFT_CPUBENCH_TIMEOUT:-420}" "$build/bench/bench_suite" \
    --only "${BERTFT_CPUBENCH_ONLY:-gemm,vs_hf}" --threads 2 --rounds 2 --json "$out/bench.json" \
    >"$out/bench.log" 2>&1)
  say "bench rc=$?"
  grep -v '^ *$' "$out/bench.log" | tail -30
fi
say "done"
