// Encodes JSONL inputs ({"text": ..., "text_pair": ...}) with Hugging Face's tokenizers
// (Rust core) and writes one JSON line per input: ids, tokens, offsets, type ids, and the ids
// decoded back to text with and without the special tokens (the Rust decode, before
// transformers' Python clean-up of spaces). The Node
// binding reports offsets in Unicode code points (checked: "a\u{1F600}b c" puts "c" at [4, 5]),
// the unit bertft's Encoding::offsets uses.
// Usage: node encode.js TOKENIZER_JSON IN_JSONL OUT_JSONL [MAX_LENGTH STRATEGY]
'use strict';
const fs = require('fs');
const path = require('path');

const modules = process.env.BERTFT_NODE_MODULES || path.join(__dirname, 'node_modules');
const { Tokenizer } = require(path.join(modules, 'tokenizers'));

async function main() {
  const [tokenizerFile, inFile, outFile, maxLength, strategy] = process.argv.slice(2);
  const tokenizer = Tokenizer.fromFile(tokenizerFile);
  if (maxLength) tokenizer.setTruncation(Number(maxLength), { strategy: strategy || 'LongestFirst' });
  const lines = fs.readFileSync(inFile, 'utf8').split('\n').filter((l) => l.length > 0);
  const out = fs.createWriteStream(outFile);
  for (const line of lines) {
    const input = JSON.parse(line);
    const pair = input.text_pair === undefined ? null : input.text_pair;
    let record;
    try {
      const e = await tokenizer.encode(input.text, pair);
      const ids = e.getIds();
      record = {
        ids, tokens: e.getTokens(), offsets: e.getOffsets(), token_type_ids: e.getTypeIds(),
        decoded: await tokenizer.decode(ids, false), decoded_skip: await tokenizer.decode(ids, true),
      };
    } catch (err) {
      record = { error: String(err) };
    }
    out.write(JSON.stringify(record) + '\n');
  }
  out.end();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
