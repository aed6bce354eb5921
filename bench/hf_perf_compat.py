"""Runs ../shared/tools/hf-reference/perf_bert.py (bench_suite's vs_hf section) on the transformers
at hand: the kit's 4.31 as it is, or a later one (the GPU machine's transformers 5, for a CPU with
AMX), which no longer has `transformers.pytorch_utils.ALL_LAYERNORM_LAYERS`, the list perf_bert.py
reads to keep LayerNorm weights out of weight decay; there it is given [torch.nn.LayerNorm], all
BERT has. Nothing else changes: the script runs as its own __main__, and prints its JSON line.
    python bench/hf_perf_compat.py PERF_BERT.PY ARGS...
"""
import runpy
import sys

import torch
import transformers.pytorch_utils

if not hasattr(transformers.pytorch_utils, "ALL_LAYERNORM_LAYERS"):
    transformers.pytorch_utils.ALL_LAYERNORM_LAYERS = [torch.nn.LayerNorm]
script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
