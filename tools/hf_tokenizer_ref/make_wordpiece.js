// Writes a WordPiece tokenizer.json made by Hugging Face's tokenizers (Rust core) itself, as a
// BERT tokenizer: WordPiece over VOCAB_TXT, BertNormalizer (lower-casing or not), BertPreTokenizer,
// [CLS] A [SEP] B [SEP] through TEMPLATE (bert: BertProcessing; template: TemplateProcessing), the
// WordPiece decoder. bertft's tests load a directory holding this file alone (no vocab.txt).
// Usage: node make_wordpiece.js VOCAB_TXT LOWERCASE(0|1) TEMPLATE(bert|template) OUT_JSON
'use strict';
const path = require('path');

const modules = process.env.BERTFT_NODE_MODULES || path.join(__dirname, 'node_modules');
const t = require(path.join(modules, 'tokenizers'));

async function main() {
  const [vocab, lowercase, template, out] = process.argv.slice(2);
  const tokenizer = new t.Tokenizer(await t.WordPiece.fromFile(vocab, { unkToken: '[UNK]' }));
  tokenizer.setNormalizer(t.bertNormalizer({ lowercase: lowercase === '1' }));
  tokenizer.setPreTokenizer(t.bertPreTokenizer());
  const cls = tokenizer.tokenToId('[CLS]'), sep = tokenizer.tokenToId('[SEP]');
  tokenizer.setPostProcessor(
    template === 'template'
      ? t.templateProcessing('[CLS] $A [SEP]', '[CLS] $A [SEP] $B:1 [SEP]:1', [['[CLS]', cls], ['[SEP]', sep]])
      : t.bertProcessing(['[SEP]', sep], ['[CLS]', cls]));
  tokenizer.setDecoder(t.wordPieceDecoder('##', true));
  tokenizer.addSpecialTokens(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']);
  tokenizer.save(out);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
