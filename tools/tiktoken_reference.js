#!/usr/bin/env node
// Reference data for the tokenizer tests: for each tiktoken encoding, the converted
// tokenizer.json (tiktoken_to_tokenizer_json.js) and tiktoken's own ids for the corpus, one
// case per line (terminator included) plus the whole file. Special tokens in the text are
// allowed, so "<|endoftext|>" gets its id as with Hugging Face added tokens.
//
//   tiktoken_reference.js --corpus corpus.txt --out DIR ENCODING...
//
// Writes DIR/ENCODING.tokenizer.json and DIR/ENCODING.expected.json ({"cases": [{"text", "ids"}]}).
// Returns at once when DIR/ENCODING.stamp matches the inputs.
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const {convert, loadPackageEncoding} = require('./tiktoken_to_tokenizer_json');

function splitCases(text) {
  const lines = text.match(/[^\n]*\n|[^\n]+$/g) || [];
  return [...lines, text];
}

function main(argv) {
  let corpus, out;
  const encodings = [];
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] === '--corpus') corpus = argv[++i];
    else if (argv[i] === '--out') out = argv[++i];
    else encodings.push(argv[i]);
  }
  if (!corpus || !out || !encodings.length) throw new Error('usage: tiktoken_reference.js --corpus F --out DIR ENCODING...');
  const tiktoken = require('tiktoken');
  const packageJson = path.join(path.dirname(require.resolve('tiktoken')), 'package.json');
  const version = JSON.parse(fs.readFileSync(packageJson, 'utf8')).version;
  const text = fs.readFileSync(corpus, 'utf8');
  const stamp = crypto.createHash('sha256')
                    .update(version)
                    .update(text)
                    .update(fs.readFileSync(__filename))
                    .update(fs.readFileSync(path.join(__dirname, 'tiktoken_to_tokenizer_json.js')))
                    .digest('hex');
  fs.mkdirSync(out, {recursive: true});
  for (const name of encodings) {
    const stampFile = path.join(out, `${name}.stamp`);
    if (fs.existsSync(stampFile) && fs.readFileSync(stampFile, 'utf8') === stamp) continue;
    const t0 = Date.now();
    const {json, unreachable} = convert(loadPackageEncoding(name));
    fs.writeFileSync(path.join(out, `${name}.tokenizer.json`), JSON.stringify(json));
    const enc = tiktoken.get_encoding(name);
    const cases = splitCases(text).map((t) => ({text: t, ids: Array.from(enc.encode(t, 'all'))}));
    enc.free();
    fs.writeFileSync(path.join(out, `${name}.expected.json`), JSON.stringify({encoding: name, tiktoken: version, cases}));
    fs.writeFileSync(stampFile, stamp);
    console.log(`${name}: ${json.model.merges.length} merges, ${unreachable} whole-piece-only tokens, ` +
                `${cases.length} cases, ${Date.now() - t0} ms`);
  }
}

try {
  main(process.argv.slice(2));
} catch (e) {
  process.stderr.write(`tiktoken_reference: ${e.message}\n`);
  process.exit(1);
}
