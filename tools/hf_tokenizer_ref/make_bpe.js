// Writes a byte-level BPE tokenizer.json made by Hugging Face's tokenizers (Rust core) itself, as
// RoBERTa's: BPE over VOCAB_JSON + MERGES_TXT, the ByteLevel pre-tokenizer without a prefix
// space, <s> A </s></s> B </s> through RobertaProcessing with trimmed offsets, the special tokens
// added. The Node binding has no ByteLevel decoder and no lstrip for added tokens, so the file
// gets RoBERTa's decoder and <mask> as RoBERTa's own tokenizer.json has them. bertft's tests load a directory holding this file alone (no vocab.json).
// Usage: node make_bpe.js VOCAB_JSON MERGES_TXT OUT_JSON
'use strict';
const fs = require('fs');
const path = require('path');

const modules = process.env.BERTFT_NODE_MODULES || path.join(__dirname, 'node_modules');
const t = require(path.join(modules, 'tokenizers'));

async function main() {
  const [vocab, merges, out] = process.argv.slice(2);
  const tokenizer = new t.Tokenizer(await t.BPE.fromFile(vocab, merges));
  tokenizer.setPreTokenizer(t.byteLevelPreTokenizer(false, true));
  const cls = tokenizer.tokenToId('<s>'), sep = tokenizer.tokenToId('</s>');
  tokenizer.setPostProcessor(t.robertaProcessing(['</s>', sep], ['<s>', cls], true, false));
  tokenizer.addSpecialTokens(['<s>', '<pad>', '</s>', '<unk>', '<mask>']);
  tokenizer.save(out);
  const saved = JSON.parse(fs.readFileSync(out, 'utf8'));
  saved.decoder = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true };
  // RoBERTa's <mask> takes the space before it (lstrip), which addSpecialTokens cannot say.
  for (const token of saved.added_tokens) if (token.content === '<mask>') token.lstrip = true;
  fs.writeFileSync(out, JSON.stringify(saved));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
