#!/usr/bin/env node
// llama.cpp, through the prebuilt node-llama-cpp package, as the peer of mminfer's generation:
// loads a GGUF (tools/write_gguf.py), feeds the prompt's token ids as they are (no BOS added,
// no tokenizer), greedy-decodes N new tokens (temperature 0: argmax, no repetition penalty, an
// end-of-text token does not stop it) and prints one JSON line per --prompt (each from an empty
// cache; the model loads once):
//   {"tokens": [...], "prefill_ms": P, "decode_ms_median": D, "decode_ms": [...], "threads": T, ...}
// prefill_ms is the prompt's evaluation up to the first new token; decode_ms the time of each
// later token (one evaluation of one token plus the argmax).
//
//   llamacpp_generate.js --model F.gguf --prompt 1,2,3 [--prompt ...] [--new-tokens 64] [--threads 1]
//                        [--context N] [--kv-cache f32|f16]
//
// It never downloads or builds: only the prebuilt CPU binaries of tools/node_modules are used
// (MMINFER_NODE_MODULES names another node_modules folder holding node-llama-cpp).
'use strict';
const fs = require('fs');
const path = require('path');
const {pathToFileURL} = require('url');

function fail(msg) {
  process.stderr.write(`llamacpp_generate.js: error: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = {newTokens: 64, threads: 1, context: 0, kvCache: 'f32', prompts: []};
  const takes = {'--model': 'model', '--prompt': 'prompt', '--new-tokens': 'newTokens', '--threads': 'threads',
                 '--context': 'context', '--kv-cache': 'kvCache'};
  for (let i = 0; i < argv.length; i++) {
    const key = takes[argv[i]];
    if (!key) fail(`unknown argument ${argv[i]} (use ${Object.keys(takes).join(', ')})`);
    if (i + 1 >= argv.length) fail(`${argv[i]} needs a value`);
    if (key === 'prompt') opts.prompts.push(argv[++i]);
    else opts[key] = argv[++i];
  }
  if (!opts.model) fail('--model F.gguf is required');
  if (!fs.existsSync(opts.model)) fail(`no such model file: ${opts.model}`);
  if (!opts.prompts.length) fail('--prompt ID,ID,... is required');
  opts.prompts = opts.prompts.map((p) => p.split(',').map((s) => {
    if (!/^\d+$/.test(s.trim())) fail(`--prompt: ${JSON.stringify(s)} is not a token id`);
    return Number(s);
  }));
  for (const k of ['newTokens', 'threads', 'context']) {
    opts[k] = Number(opts[k]);
    if (!Number.isInteger(opts[k]) || opts[k] < 0) fail(`--${k.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase())} must be a whole number`);
  }
  if (opts.newTokens < 1 || opts.threads < 1) fail('--new-tokens and --threads must be at least 1');
  if (!['f32', 'f16'].includes(opts.kvCache)) fail('--kv-cache must be f32 or f16');
  return opts;
}

async function loadBinding() {
  const dir = process.env.MMINFER_NODE_MODULES || path.join(__dirname, 'node_modules');
  const entry = path.join(dir, 'node-llama-cpp', 'dist', 'index.js');
  if (!fs.existsSync(entry)) fail(`node-llama-cpp is not installed in ${dir} (run scripts/bootstrap)`);
  return import(pathToFileURL(entry).href);
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : null;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const {getLlama, LlamaLogLevel} = await loadBinding();
  // gpu false, build never, skipDownload: the prebuilt linux-x64 CPU binaries or an error.
  const llama = await getLlama({gpu: false, build: 'never', skipDownload: true, usePrebuiltBinaries: true,
                                progressLogs: false, logLevel: LlamaLogLevel.error, maxThreads: opts.threads});
  const model = await llama.loadModel({modelPath: path.resolve(opts.model), gpuLayers: 0});
  const meta = model.fileInfo.metadata ?? {};
  const vocab = meta.tokenizer?.ggml?.tokens?.length ?? meta.llama?.vocab_size ?? Infinity;
  const longest = Math.max(...opts.prompts.map((p) => p.length));
  for (const prompt of opts.prompts) {
    const bad = prompt.find((t) => t >= vocab);
    if (bad !== undefined) fail(`--prompt: token id ${bad} is outside the vocabulary (${vocab})`);
  }
  const needed = longest + opts.newTokens;
  const trained = model.trainContextSize;
  if (needed > trained) fail(`a prompt (${longest}) plus ${opts.newTokens} new tokens exceed the model's context (${trained})`);
  const contextSize = Math.max(opts.context, needed);
  const context = await model.createContext({
    contextSize, batchSize: Math.min(contextSize, 2048), threads: {ideal: opts.threads, min: opts.threads},
    sequences: 1, flashAttention: false,
    experimentalKvCacheKeyType: opts.kvCache.toUpperCase(), experimentalKvCacheValueType: opts.kvCache.toUpperCase()});
  const sequence = context.getSequence();

  const ms = (a, b) => Number(b - a) / 1e6;
  for (const prompt of opts.prompts) {
    await sequence.clearHistory();
    const tokens = [];
    const stamps = [];
    const start = process.hrtime.bigint();
    for await (const token of sequence.evaluate(prompt, {temperature: 0, yieldEogToken: true})) {
      stamps.push(process.hrtime.bigint());
      tokens.push(token);
      if (tokens.length >= opts.newTokens) break;
    }
    const decode = stamps.slice(1).map((t, i) => ms(stamps[i], t));
    process.stdout.write(JSON.stringify({
      tokens, prompt_tokens: prompt.length, prefill_ms: ms(start, stamps[0]), decode_ms_median: median(decode),
      decode_ms: decode.map((x) => Math.round(x * 1000) / 1000), threads: context.currentThreads ?? opts.threads,
      kv_cache: opts.kvCache, cpu_backend: llama.buildType, gguf: path.basename(opts.model)}) + '\n');
  }
  await context.dispose();
  await model.dispose();
  await llama.dispose();
}

main().catch((e) => fail(String(e && e.message ? e.message : e).split('\n')[0]));
