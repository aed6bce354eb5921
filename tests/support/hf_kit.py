"""What the HF-side test scripts beside this file share (run with the HF reference kit's
interpreter, never on a user's path)."""
import importlib
import json
import os
import sys
import types

import transformers
from transformers import AutoTokenizer


def read_jsonl(path):
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def load_tokenizer(model_dir):
    """HF's tokenizer, else its slow one (the kit has no `tokenizers` package), else None (XLM-R's
    slow tokenizer needs Python's sentencepiece, which the kit lacks)."""
    for fast in (True, False):
        try:
            return AutoTokenizer.from_pretrained(model_dir, use_fast=fast)
        except (ImportError, ValueError):  # ValueError: "cannot be instantiated" (no backend)
            continue
    return None


def pipeline_module(name):
    """transformers.pipelines.<name> (token_classification, text_classification) without
    transformers.pipelines' __init__, which imports every pipeline and fails without the
    `tokenizers` package."""
    package = types.ModuleType("transformers.pipelines")
    package.__path__ = [os.path.join(os.path.dirname(transformers.__file__), "pipelines")]
    sys.modules.setdefault("transformers.pipelines", package)
    return importlib.import_module("transformers.pipelines." + name)


def load_sequence_classifier(model_dir):
    """MODEL_DIR's config, tokenizer and AutoModelForSequenceClassification (eval mode, one
    thread), and the start of a report: model and tokenizer classes, loading_info, problem_type."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification
    torch.set_num_threads(1)
    config = AutoConfig.from_pretrained(model_dir)
    tok = load_tokenizer(model_dir)
    if tok is None:
        sys.exit("no HF tokenizer for " + model_dir)
    model, info = AutoModelForSequenceClassification.from_pretrained(model_dir, output_loading_info=True)
    model.eval()
    report = {"model_class": type(model).__name__, "tokenizer_class": type(tok).__name__,
              "loading_info": {key: sorted(str(v) for v in value) for key, value in info.items()},
              "problem_type": config.problem_type}
    return config, tok, model, report
