"""HF side of bench_suite's `real_data` section: training steps over the first N examples of a GLUE
train.tsv with transformers 4.31 as run_glue.py configures it by default, timed.

Run with the reference kit's interpreter (../shared/tools/hf-reference/setup.sh build/hf-reference):
    build/hf-reference/python bench/hf_glue_epoch.py --data DIR/train.tsv --task mrpc \
        --vocab bert-base-cased-vocab.txt --limit 256 --padding max_length
Prints one JSON line: steps, seconds (training loop only, after one untimed warm-up step),
padded tokens, peak RSS.

What "run_glue's defaults" means here: per-device batch 8, max_seq_length 128, every sequence
padded to 128 (`--padding max_length`, run_glue's pad_to_max_length=True) or padded per batch
(`--padding longest`, DataCollatorWithPadding), random sampling, AdamW (torch's, lr 5e-5, weight
decay 0 as TrainingArguments defaults, eps 1e-8), linear schedule, gradient clipping at 1.0,
dropout on. The model is bert-base-shaped with random weights (no model hub here): time does not
depend on the weights. Tokenisation is outside the timed loop on both sides.
"""
import argparse
import csv
import json
import random
import resource
import sys
import time

import torch
from transformers import (BertConfig, BertForSequenceClassification, BertTokenizer,
                          get_linear_schedule_with_warmup)

# (text_a column, text_b column or None, label column) of each task's train.tsv
COLUMNS = {"mrpc": (3, 4, 0), "stsb": (7, 8, 9), "cola": (3, None, 1), "sst2": (0, None, 1)}
HEADER = {"mrpc": True, "stsb": True, "cola": False, "sst2": True}


def read_rows(path, task, limit):
    a, b, label = COLUMNS[task]
    rows = []
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        if HEADER[task]:
            next(reader)
        for row in reader:
            rows.append((row[a], row[b] if b is not None else None, row[label]))
            if len(rows) == limit:
                break
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--task", required=True, choices=sorted(COLUMNS))
    p.add_argument("--vocab", required=True)
    p.add_argument("--limit", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--padding", choices=["max_length", "longest"], default="max_length")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)

    rows = read_rows(args.data, args.task, args.limit)
    tokenizer = BertTokenizer(args.vocab, do_lower_case=False)
    regression = args.task == "stsb"
    encoded = []
    for a, b, label in rows:
        e = tokenizer(a, b, truncation=True, max_length=args.seq,
                      padding="max_length" if args.padding == "max_length" else False)
        encoded.append((e, float(label) if regression else int(label)))

    config = BertConfig(vocab_size=tokenizer.vocab_size, num_labels=1 if regression else 2)
    model = BertForSequenceClassification(config)
    model.train()
    # TrainingArguments' weight_decay is 0, so Trainer's two parameter groups (decay / no decay)
    # both decay by 0: one group is the same optimizer.
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=0.0)
    order = list(range(len(encoded)))
    random.shuffle(order)
    batches = [order[i:i + args.batch] for i in range(0, len(order), args.batch)]
    scheduler = get_linear_schedule_with_warmup(optimizer, 0, len(batches) + 1)

    def collate(indices):
        width = max(len(encoded[i][0]["input_ids"]) for i in indices)
        out = {"input_ids": [], "token_type_ids": [], "attention_mask": []}
        for i in indices:
            e = encoded[i][0]
            pad = width - len(e["input_ids"])
            for key, fill in (("input_ids", tokenizer.pad_token_id), ("token_type_ids", 0),
                              ("attention_mask", 0)):
                out[key].append(list(e[key]) + [fill] * pad)
        tensors = {k: torch.tensor(v) for k, v in out.items()}
        labels = [encoded[i][1] for i in indices]
        tensors["labels"] = torch.tensor(labels, dtype=torch.float if regression else torch.long)
        return tensors

    def step(indices):
        batch = collate(indices)
        model(**batch).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        return batch["input_ids"].numel()

    step(batches[0])  # warm-up (first-call costs), untimed as on bertft's side
    padded_tokens = 0
    start = time.perf_counter()
    for indices in batches:
        padded_tokens += step(indices)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"steps": len(batches), "seconds": seconds, "padded_tokens": padded_tokens,
                      "examples": len(encoded), "peak_rss_mib": peak}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
