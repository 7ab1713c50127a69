#!/usr/bin/env node
// ONNX Runtime as its users run a decoder-only model with past (the Optimum loop): prefill the
// prompt with zero-length pasts, then one token per step with every present fed back as the
// next step's past (ORT returns a fresh copy of the whole cache each step). Greedy argmax.
// Prints one JSON document: {"prefill_ms": median over --repeats after one warm-up run, "decode_ms_median": per token,
// "context": prompt length, "tokens": [...]}.
//
//   ort_generate_bench.js FOLDER [--prompt-tokens 32 | --prompt ID,ID,...] [--new-tokens 64]
//                         [--threads 1] [--repeats 3]
//
// FOLDER holds model.onnx and config.json (tools/make_generative_models.py's LLaMA layout).
// Without --prompt, the prompt is a fixed sequence of ids, so runs are comparable.
// Sessions: all graph optimizations, sequential execution, --threads intra-op threads.
'use strict';
const fs = require('fs');
const path = require('path');

function fail(msg) {
  process.stderr.write(`ort_generate_bench.js: error: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = {promptTokens: 32, newTokens: 64, threads: 1, repeats: 3};
  const takes = {'--prompt-tokens': 'promptTokens', '--new-tokens': 'newTokens', '--threads': 'threads', '--repeats': 'repeats'};
  for (let i = 0; i < argv.length; i++) {
    if (takes[argv[i]]) {
      if (i + 1 >= argv.length) fail(`${argv[i]} needs a value`);
      const v = Number(argv[++i]);
      if (!Number.isInteger(v) || v < 1) fail(`${argv[i - 1]} must be a whole number of at least 1`);
      opts[takes[argv[i - 1]]] = v;
    } else if (argv[i] === '--prompt') {
      if (i + 1 >= argv.length) fail('--prompt needs a value');
      opts.prompt = argv[++i].split(',').map((x) => {
        if (!/^\d+$/.test(x.trim())) fail(`--prompt: ${JSON.stringify(x)} is not a token id`);
        return Number(x);
      });
    } else if (argv[i].startsWith('--')) {
      fail(`unknown option ${argv[i]} (use ${Object.keys(takes).join(', ')})`);
    } else if (opts.folder) {
      fail(`one folder only (got ${opts.folder} and ${argv[i]})`);
    } else {
      opts.folder = argv[i];
    }
  }
  if (!opts.folder) fail('FOLDER (with model.onnx and config.json) is required');
  return opts;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function argmaxLast(logits) {
  const [, seq, vocab] = logits.dims;
  const data = logits.data;
  let best = 0;
  for (let v = 1, base = (seq - 1) * vocab; v < vocab; v++) if (data[base + v] > data[base + best]) best = v;
  return best;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const modelPath = path.join(opts.folder, 'model.onnx');
  let config;
  try {
    config = JSON.parse(fs.readFileSync(path.join(opts.folder, 'config.json'), 'utf8'));
  } catch (e) {
    fail(`cannot read ${path.join(opts.folder, 'config.json')}: ${e.message}`);
  }
  if (!fs.existsSync(modelPath)) fail(`${modelPath} is missing`);
  const layers = config.num_hidden_layers;
  const kvHeads = config.num_key_value_heads ?? config.num_attention_heads;
  const headDim = config.head_dim ?? config.hidden_size / config.num_attention_heads;
  if (!layers || !kvHeads || !headDim) fail('config.json lacks num_hidden_layers / num_attention_heads / hidden_size');
  if (opts.prompt) opts.promptTokens = opts.prompt.length;
  const maxPos = config.max_position_embeddings ?? Infinity;
  if (opts.promptTokens + opts.newTokens > maxPos) {
    fail(`prompt (${opts.promptTokens}) plus new tokens (${opts.newTokens}) exceed the model's ${maxPos} positions`);
  }

  const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));
  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: opts.threads, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all'});

  const i64 = (values, dims) => new ort.Tensor('int64', BigInt64Array.from(values, BigInt), dims);
  const emptyPast = () => {
    const feeds = {};
    for (let i = 0; i < layers; i++) {
      for (const kind of ['key', 'value']) {
        feeds[`past_key_values.${i}.${kind}`] = new ort.Tensor('float32', new Float32Array(0), [1, kvHeads, 0, headDim]);
      }
    }
    return feeds;
  };
  const p = opts.promptTokens;
  const prompt = opts.prompt ?? Array.from({length: p}, (_, i) => (i * 7919 + 13) % config.vocab_size);
  const outside = prompt.find((t) => t >= config.vocab_size);
  if (outside !== undefined) fail(`--prompt: token id ${outside} is outside the vocabulary (${config.vocab_size})`);
  const prefillFeeds = () => ({
    input_ids: i64(prompt, [1, p]), attention_mask: i64(new Array(p).fill(1), [1, p]),
    position_ids: i64(prompt.map((_, i) => i), [1, p]), ...emptyPast()});

  const ms = (a, b) => Number(b - a) / 1e6;
  let out;
  const prefill = [];
  for (let r = 0; r <= opts.repeats; r++) {  // the first run warms up and is not counted
    const feeds = prefillFeeds();
    const t0 = process.hrtime.bigint();
    out = await session.run(feeds);
    if (r > 0) prefill.push(ms(t0, process.hrtime.bigint()));
  }
  const tokens = [argmaxLast(out.logits)];
  const decode = [];
  for (let step = 1; step < opts.newTokens; step++) {
    const total = p + step;
    const feeds = {input_ids: i64([tokens[tokens.length - 1]], [1, 1]),
                   attention_mask: i64(new Array(total).fill(1), [1, total]), position_ids: i64([total - 1], [1, 1])};
    for (let i = 0; i < layers; i++) {
      for (const kind of ['key', 'value']) feeds[`past_key_values.${i}.${kind}`] = out[`present.${i}.${kind}`];
    }
    const t0 = process.hrtime.bigint();
    out = await session.run(feeds);
    tokens.push(argmaxLast(out.logits));
    decode.push(ms(t0, process.hrtime.bigint()));
  }
  process.stdout.write(JSON.stringify({
    context: p, threads: opts.threads, prefill_ms: median(prefill), prefill_ms_all: prefill,
    decode_ms_median: decode.length ? median(decode) : null, decode_steps: decode.length, tokens}) + '\n');
}

main().catch((e) => fail(String(e && e.message ? e.message : e).split('\n')[0]));
