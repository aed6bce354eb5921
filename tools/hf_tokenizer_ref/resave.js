// Loads a tokenizer.json with Hugging Face's tokenizers (Rust core) and writes it back as that
// library serialises it (its own spelling of every setting, e.g. Metaspace's prepend_scheme), so
// that bertft's tests can load a file HF itself wrote.
// Usage: node resave.js IN_JSON OUT_JSON
'use strict';
const path = require('path');

const modules = process.env.BERTFT_NODE_MODULES || path.join(__dirname, 'node_modules');
const { Tokenizer } = require(path.join(modules, 'tokenizers'));

const [input, output] = process.argv.slice(2);
try {
  Tokenizer.fromFile(input).save(output);
} catch (err) {
  console.error(err);
  process.exit(1);
}
