#!/usr/bin/env python3
"""The Hugging Face side of bertft's fill-mask tests (run by the tests with the HF reference kit's
interpreter, never on a user's path): loads MODEL_DIR with AutoTokenizer and AutoModelForPreTraining
(architectures ...ForPreTraining) or AutoModelForMaskedLM, and for each JSON line {"text",
"text_pair"?} of INPUTS gives what HF 4.31's fill-mask pipeline gives (top K tokens by probability
at each mask token; each token decoded alone; the input with it in place, decoded without special
tokens when there is one mask, with them when there are more; padding dropped) and, for a model with
an NSP head, the softmax of its seq_relationship logits. With TOKENS (`bertft tokenize` JSON lines for
the same inputs) the model runs on bertft's ids and token types: the kit has only HF's slow
tokenizers, and RoBERTa's strips the space after <mask>, which the fast one keeps; where HF has no
tokenizer for the model (XLM-R's needs Python's sentencepiece), token_str, sequence and hf_ids are
null and tokenizer_class is null.
  hf_fill_mask.py MODEL_DIR INPUTS K [TOKENS]
Prints one JSON object: model_class, tokenizer_class, loading_info, results (one per input: hf_ids,
the slow tokenizer's ids; ids, those the model ran on; masks; next_sentence).
"""
import json
import sys

import torch
from transformers import AutoConfig, AutoModelForMaskedLM, AutoModelForPreTraining

from hf_kit import load_tokenizer, read_jsonl


class IdsOnly:
    """Without HF's tokenizer: the special ids from bertft's tokens, no decoding (token_str and
    sequence are None; the model still runs on bertft's ids)."""

    def __init__(self, config, given):
        # bertft shows fairseq's <mask> with the space it takes (lstrip) as " <mask>".
        tokens = {t.strip(): i for row in given for t, i in zip(row["tokens"], row["ids"])}
        self.mask_token_id = tokens.get("<mask>", tokens.get("[MASK]"))
        self.pad_token_id = config.pad_token_id
        self.model_input_names = ["input_ids", "attention_mask"]

    def decode(self, ids, skip_special_tokens=False):
        return None


def fill(tok, ids, logits, k):
    positions = [i for i, t in enumerate(ids) if t == tok.mask_token_id]
    masks = []
    for pos in positions:
        probs = torch.softmax(logits[pos].float(), dim=-1)
        top = torch.topk(probs, k)
        candidates = []
        for score, token in zip(top.values.tolist(), top.indices.tolist()):
            filled = [token if i == pos else t for i, t in enumerate(ids)]
            filled = [t for t in filled if t != tok.pad_token_id]  # as the pipeline drops padding
            candidates.append({"score": score, "token": token, "token_str": tok.decode([token]),
                               "sequence": tok.decode(filled, skip_special_tokens=len(positions) == 1)})
        masks.append(candidates)
    return masks


def main():
    model_dir, inputs, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rows = read_jsonl(sys.argv[4]) if len(sys.argv) > 4 else None
    given = iter(rows) if rows else None
    torch.set_num_threads(1)
    config = AutoConfig.from_pretrained(model_dir)
    tok = load_tokenizer(model_dir)
    hf_tokenizer = tok is not None
    if not hf_tokenizer:
        if rows is None:
            sys.exit("no HF tokenizer for " + model_dir + " and no bertft tokens to run on")
        tok = IdsOnly(config, rows)
    pretraining = any(a.endswith("ForPreTraining") for a in (config.architectures or []))
    auto = AutoModelForPreTraining if pretraining else AutoModelForMaskedLM
    model, info = auto.from_pretrained(model_dir, output_loading_info=True)
    model.eval()
    report = {"model_class": type(model).__name__,
              "tokenizer_class": type(tok).__name__ if hf_tokenizer else None,
              "loading_info": {key: sorted(str(v) for v in value) for key, value in info.items()},
              "results": []}
    with torch.no_grad():
        for row in read_jsonl(inputs):
            hf_ids = tok(row["text"], row.get("text_pair"))["input_ids"] if hf_tokenizer else None
            theirs = next(given) if given else None  # bertft's encoding of the same input
            ids = theirs["ids"] if theirs else hf_ids
            enc = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
            if "token_type_ids" in tok.model_input_names:
                types = theirs["token_type_ids"] if theirs else tok(row["text"], row.get("text_pair"))["token_type_ids"]
                enc["token_type_ids"] = torch.tensor([types])
            out = model(**enc)
            mlm = out.prediction_logits if pretraining else out.logits
            result = {"hf_ids": hf_ids, "ids": ids, "masks": fill(tok, ids, mlm[0], k)}
            if pretraining:
                result["next_sentence"] = torch.softmax(out.seq_relationship_logits[0], dim=-1).tolist()
            report["results"].append(result)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
