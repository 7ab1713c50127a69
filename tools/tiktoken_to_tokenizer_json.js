#!/usr/bin/env node
// Turns a tiktoken rank table into an equivalent Hugging Face tokenizer.json (byte-level BPE):
// the vocabulary is the ranks, each merge is recovered by replaying BPE on a token's bytes
// with only lower ranks allowed (the two parts left are the pair that makes it), and the
// encoding's regex becomes the Split pattern. tiktoken looks a whole piece up before merging,
// which "ignore_merges" reproduces; tokens no merge sequence reaches stay reachable that way.
//
//   tiktoken_to_tokenizer_json.js ENCODING OUT.json            (gpt2, r50k_base, cl100k_base, ...
//                                                                from the tiktoken npm package)
//   tiktoken_to_tokenizer_json.js --ranks F.tiktoken --pattern REGEX [--special TOKEN=ID]... OUT.json
'use strict';
const fs = require('fs');

// Byte-level alphabet of GPT-2: printable Latin-1 bytes stand for themselves, the others
// take code points from U+0100 on, in byte order.
function byteLevelAlphabet() {
  const printable = (b) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const table = new Array(256);
  let next = 256;
  for (let b = 0; b < 256; ++b) table[b] = String.fromCodePoint(printable(b) ? b : next++);
  return table;
}

// Ranks from the npm package's compressed form: lines of "! OFFSET base64 base64 ...".
function loadPackageEncoding(name) {
  const data = require(`tiktoken/encoders/${name}.json`);
  const ranks = new Map();
  for (const line of data.bpe_ranks.split('\n')) {
    if (!line) continue;
    const [, offset, ...tokens] = line.split(' ');
    tokens.forEach((t, i) => ranks.set(Buffer.from(t, 'base64').toString('latin1'), Number(offset) + i));
  }
  return {ranks, pattern: data.pat_str, special: data.special_tokens};
}

// The plain .tiktoken format: "base64 rank" per line.
function loadTiktokenFile(path) {
  const ranks = new Map();
  for (const line of fs.readFileSync(path, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const [token, rank] = line.split(' ');
    ranks.set(Buffer.from(token, 'base64').toString('latin1'), Number(rank));
  }
  return ranks;
}

// Byte strings are latin1 JS strings (one char per byte) so Map lookups stay cheap.
function recoverMerge(bytes, rank, ranks) {
  let parts = Array.from(bytes);
  for (;;) {
    let best = -1, bestRank = rank;
    for (let i = 0; i + 1 < parts.length; ++i) {
      const r = ranks.get(parts[i] + parts[i + 1]);
      if (r !== undefined && r < bestRank) {
        best = i;
        bestRank = r;
      }
    }
    if (best < 0) break;
    parts.splice(best, 2, parts[best] + parts[best + 1]);
  }
  return parts.length === 2 ? parts : null;
}

function convert({ranks, pattern, special}) {
  const alphabet = byteLevelAlphabet();
  const toText = (bytes) => Array.from(bytes, (c) => alphabet[c.charCodeAt(0)]).join('');
  const byRank = [...ranks.entries()].sort((a, b) => a[1] - b[1]);
  const vocab = {};
  const merges = [];
  let unreachable = 0;
  for (const [bytes, rank] of byRank) {
    vocab[toText(bytes)] = rank;
    if (bytes.length < 2) continue;
    const pair = recoverMerge(bytes, rank, ranks);
    if (pair) merges.push(`${toText(pair[0])} ${toText(pair[1])}`);
    else ++unreachable;  // only whole-piece lookup (ignore_merges) yields it, as in tiktoken
  }
  const added = Object.entries(special || {}).map(([content, id]) => ({
    id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
  }));
  const json = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        {type: 'Split', pattern: {Regex: pattern}, behavior: 'Isolated', invert: false},
        {type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false},
      ],
    },
    post_processor: {type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true},
    decoder: {type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true},
    model: {
      type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab, merges,
    },
  };
  return {json, unreachable};
}

function main(argv) {
  const args = {special: {}};
  const positional = [];
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--ranks' || a === '--pattern') args[a.slice(2)] = argv[++i];
    else if (a === '--special') {
      const [token, id] = argv[++i].split(/=(?=\d+$)/);
      args.special[token] = Number(id);
    } else positional.push(a);
  }
  let source, out;
  if (args.ranks) {
    if (!args.pattern || positional.length !== 1) throw new Error('--ranks needs --pattern and one OUT.json');
    source = {ranks: loadTiktokenFile(args.ranks), pattern: args.pattern, special: args.special};
    out = positional[0];
  } else {
    if (positional.length !== 2) throw new Error('usage: tiktoken_to_tokenizer_json.js ENCODING OUT.json');
    source = loadPackageEncoding(positional[0]);
    out = positional[1];
  }
  const {json, unreachable} = convert(source);
  fs.writeFileSync(out, JSON.stringify(json));
  process.stderr.write(`${out}: ${Object.keys(json.model.vocab).length} tokens, ${json.model.merges.length} merges, ` +
                       `${unreachable} tokens reachable only as whole pieces\n`);
}

module.exports = {convert, loadPackageEncoding, loadTiktokenFile};
if (require.main === module) {
  try {
    main(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`tiktoken_to_tokenizer_json: ${e.message}\n`);
    process.exit(1);
  }
}
