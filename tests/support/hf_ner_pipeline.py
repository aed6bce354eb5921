#!/usr/bin/env python3
"""The Hugging Face side of bertft's token-classification tests on raw text (run by the tests with
the HF reference kit's interpreter, never on a user's path): HF 4.31's TokenClassificationPipeline
post-processing (gather_pre_entities, aggregate, group_entities, the "O" filter) on the logits of
AutoModelForTokenClassification from MODEL_DIR, for each JSON line {"text"} of INPUTS and each
aggregation strategy named.
  hf_ner_pipeline.py MODEL_DIR INPUTS TOKENS STRATEGY [STRATEGY ...]
TOKENS: `bertft tokenize --model MODEL_DIR` JSON lines for the same texts (ids, token types,
offsets in code points): the kit has only HF's slow tokenizer, which gives no offsets and no
decoder, so the ids and offsets come from bertft's tokenizer (proven against HF's fast one by the
tokenizer reference tests) and the tokenizer the pipeline sees gets what the fast one has: for
BertTokenizerFast `_tokenizer.model.continuing_subword_prefix` and convert_tokens_to_string through
the WordPiece decoder, for RobertaTokenizerFast (whose BPE model has no such prefix, so the pipeline
takes its space heuristic) convert_tokens_to_string through the ByteLevel decoder (below).
For XLM-R the kit cannot build even the slow tokenizer (it needs Python's sentencepiece), so the
pipeline gets a stand-in with what it reads: each id's token (bertft's, in TOKENS), <unk>'s id,
and convert_tokens_to_string through the Metaspace decoder; the fast XLMRobertaTokenizerFast's
model has no continuing_subword_prefix either, so the pipeline takes its space heuristic.
Everything else is the pipeline's own code.
Prints one JSON object: {"results": [{strategy: [entity, ...]} per input]}.
"""
import json
import sys
from types import SimpleNamespace

import torch
from transformers import AutoModelForTokenClassification

from hf_kit import load_tokenizer, pipeline_module, read_jsonl


# HF's clean_up_tokenization, which the WordPiece decoder (cleanup: true) applies token by token.
CLEANUP = [(" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
           (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")]


def wordpiece_decoder(tokens, prefix="##"):
    """`tokenizers`' WordPiece decoder (BertTokenizerFast's convert_tokens_to_string): a space
    before each token but the first unless it continues a word, then the clean-up per token."""
    out = []
    for i, token in enumerate(tokens):
        if i > 0:
            token = token[len(prefix):] if token.startswith(prefix) else " " + token
        for a, b in CLEANUP:
            token = token.replace(a, b)
        out.append(token)
    return "".join(out)


def byte_level_decoder(byte_decoder):
    """`tokenizers`' ByteLevel decoder (RobertaTokenizerFast's convert_tokens_to_string): each
    token's byte symbols back to bytes (a token with any other character, as the pipeline's words
    already decoded, as its own UTF-8), the whole read as UTF-8 with U+FFFD for what is invalid."""
    def decode(tokens):
        out = bytearray()
        for token in tokens:
            if all(c in byte_decoder for c in token):
                out += bytes(byte_decoder[c] for c in token)
            else:
                out += token.encode("utf-8")
        return out.decode("utf-8", errors="replace")
    return decode


def metaspace_decoder(tokens):
    """`tokenizers`' Metaspace decoder (XLMRobertaTokenizerFast's convert_tokens_to_string, a
    prefix space added): each "\u2581" as a space, the first token's leading one dropped."""
    out = []
    for i, token in enumerate(tokens):
        token = token.replace("\u2581", " ")
        out.append(token[1:] if i == 0 and token.startswith(" ") else token)
    return "".join(out)


def plain(value):
    """numpy scalars to JSON numbers."""
    return value.item() if hasattr(value, "item") else value


def main():
    model_dir, inputs, tokens = sys.argv[1], read_jsonl(sys.argv[2]), read_jsonl(sys.argv[3])
    strategies = sys.argv[4:]
    model = AutoModelForTokenClassification.from_pretrained(model_dir).eval()
    tok = load_tokenizer(model_dir)
    if tok is None:  # XLM-R: a stand-in (above)
        vocab = {i: t for enc in tokens for i, t in zip(enc["ids"], enc["tokens"])}
        tok = SimpleNamespace(convert_ids_to_tokens=lambda i: vocab[i], unk_token_id=3,
                              cls_token="<s>", sep_token="</s>",
                              convert_tokens_to_string=metaspace_decoder)
    elif hasattr(tok, "byte_decoder"):  # RoBERTa's slow tokenizer: no `_tokenizer`, the heuristic
        tok.convert_tokens_to_string = byte_level_decoder(tok.byte_decoder)
    else:
        tok._tokenizer = SimpleNamespace(model=SimpleNamespace(continuing_subword_prefix="##"))
        tok.convert_tokens_to_string = wordpiece_decoder
    ner = pipeline_module("token_classification")
    try:
        pipe = ner.TokenClassificationPipeline(model=model, tokenizer=tok, framework="pt")
    except TypeError:  # transformers 5 (PyTorch only) takes no `framework`, and puts the
        # model on a GPU where there is one unless told: the inputs below are on the CPU.
        pipe = ner.TokenClassificationPipeline(model=model, tokenizer=tok, device="cpu")
    results = []
    for row, enc in zip(inputs, tokens):
        ids = torch.tensor([enc["ids"]])
        with torch.no_grad():
            logits = model(input_ids=ids, token_type_ids=torch.tensor([enc["token_type_ids"]]),
                           attention_mask=torch.ones_like(ids)).logits
        special = [1 if t in (tok.cls_token, tok.sep_token) else 0 for t in enc["tokens"]]
        outputs = {"logits": logits, "input_ids": ids, "sentence": row["text"],
                   "special_tokens_mask": torch.tensor([special]),
                   "offset_mapping": torch.tensor([enc["offsets"]])}
        per = {}
        for s in strategies:
            entities = pipe.postprocess([outputs], aggregation_strategy=ner.AggregationStrategy[s.upper()])
            per[s] = [{k: plain(v) for k, v in e.items()} for e in entities]
        results.append(per)
    json.dump({"results": results}, sys.stdout)


if __name__ == "__main__":
    main()
