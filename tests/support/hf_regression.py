#!/usr/bin/env python3
"""The Hugging Face side of bertft's regression export test (run by the tests with the HF reference
kit's interpreter, never on a user's path): loads MODEL_DIR with AutoTokenizer and
AutoModelForSequenceClassification and scores each input of TOKENS (`bertft tokenize` JSON lines:
ids, token_type_ids) with the model's single output; TEXTS (JSON lines {"text", "text_pair"}, the
same inputs) are encoded by HF's own tokenizer too, to compare the ids.
  hf_regression.py MODEL_DIR TEXTS TOKENS
Prints one JSON object: model_class, tokenizer_class, loading_info, problem_type, num_labels,
results (one per input: hf_ids, ids, score).
"""
import json
import sys

import torch
from hf_kit import load_sequence_classifier, read_jsonl


def main():
    model_dir, texts, tokens = sys.argv[1], read_jsonl(sys.argv[2]), read_jsonl(sys.argv[3])
    config, tok, model, report = load_sequence_classifier(model_dir)
    report.update({"num_labels": config.num_labels, "results": []})
    with torch.no_grad():
        for text, ours in zip(texts, tokens):
            ids = ours["ids"]
            out = model(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                        token_type_ids=torch.tensor([ours["token_type_ids"]]))
            report["results"].append({"hf_ids": tok(text["text"], text.get("text_pair"))["input_ids"], "ids": ids,
                                      "score": float(out.logits[0, 0])})
    print(json.dumps(report))


if __name__ == "__main__":
    main()
