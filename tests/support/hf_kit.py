"""What the HF-side test scripts beside this file share (run with the HF reference kit's
interpreter, never on a user's path)."""
import json

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
