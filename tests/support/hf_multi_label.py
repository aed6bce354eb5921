#!/usr/bin/env python3
"""The Hugging Face side of bertft's multi-label export test (run by the tests with the HF reference
kit's interpreter, never on a user's path): loads MODEL_DIR with AutoTokenizer and
AutoModelForSequenceClassification and, for each input of TOKENS (`bertft tokenize` JSON lines:
ids, token_type_ids), gives each label's sigmoid probability and the model's own loss against the
input's gold labels (TEXTS: JSON lines {"text", "labels"}, the same inputs, also encoded by HF's
tokenizer to compare the ids); then HF's text-classification pipeline on each text with
top_k=None, every label's score as the pipeline computes it for such a model.
  hf_multi_label.py MODEL_DIR TEXTS TOKENS
Prints one JSON object: model_class, tokenizer_class, loading_info, problem_type, labels (by id),
results (one per input: hf_ids, ids, probabilities {label: p}, loss, pipeline {label: score}).
"""
import json
import sys

import torch
from hf_kit import load_sequence_classifier, pipeline_module, read_jsonl


def main():
    model_dir, texts, tokens = sys.argv[1], read_jsonl(sys.argv[2]), read_jsonl(sys.argv[3])
    config, tok, model, report = load_sequence_classifier(model_dir)
    names = [config.id2label[i] for i in range(config.num_labels)]
    report.update({"labels": names, "results": []})
    # HF's TextClassificationPipeline itself (the pipelines package whole needs `tokenizers`).
    classify = pipeline_module("text_classification").TextClassificationPipeline(model=model, tokenizer=tok)
    with torch.no_grad():
        for text, ours in zip(texts, tokens):
            ids = ours["ids"]
            gold = torch.zeros(1, len(names))
            for label in text["labels"]:
                gold[0, config.label2id[label]] = 1.0
            out = model(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                        token_type_ids=torch.tensor([ours["token_type_ids"]]), labels=gold)
            probs = torch.sigmoid(out.logits[0])
            scored = classify(text["text"], top_k=None)
            if scored and isinstance(scored[0], list):
                scored = scored[0]
            report["results"].append({
                "hf_ids": tok(text["text"])["input_ids"], "ids": ids,
                "probabilities": {names[i]: float(probs[i]) for i in range(len(names))},
                "loss": float(out.loss),
                "pipeline": {s["label"]: float(s["score"]) for s in scored}})
    print(json.dumps(report))


if __name__ == "__main__":
    main()
