#!/usr/bin/env node
// Times ONNX Runtime's usual present->past decode loop on a decoder-only model.onnx (the Optimum
// form with position_ids, or onnxruntime-genai's builder form without): a prompt of random
// tokens, then one token per step with each step's present.* fed back as past_key_values.*.
//
//   ort_naive_decode.js MODEL --kv-heads N --head-dim N --layers N [--prompt 16] [--steps 64]
//                       [--threads 1] [--vocab 1000]
//
// Prints one JSON line: {"prefill_ms", "decode_ms_per_token" (median over the steps), "steps"}.
'use strict';
const path = require('path');
const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));

function option(name, fallback) {
  const i = process.argv.indexOf(name);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isInteger(v) || v < 0) {
    process.stderr.write(`ort_naive_decode.js: error: ${name} needs a non-negative integer\n`);
    process.exit(2);
  }
  return v;
}

async function main() {
  const model = process.argv[2];
  if (!model || model.startsWith('--')) {
    process.stderr.write('usage: ort_naive_decode.js MODEL --kv-heads N --head-dim N --layers N [--prompt 16] [--steps 64] [--threads 1]\n');
    process.exit(2);
  }
  const kv = option('--kv-heads'), hd = option('--head-dim'), layers = option('--layers');
  if (!kv || !hd || !layers) {
    process.stderr.write('ort_naive_decode.js: error: --kv-heads, --head-dim and --layers are required\n');
    process.exit(2);
  }
  const prompt = option('--prompt', 16), steps = option('--steps', 64), threads = option('--threads', 1);
  const vocab = option('--vocab', 1000);
  const session = await ort.InferenceSession.create(model, {intraOpNumThreads: threads, interOpNumThreads: 1});
  const wantsPositions = session.inputNames.includes('position_ids');
  const feeds = {};
  for (let i = 0; i < layers; ++i)
    for (const kind of ['key', 'value'])
      feeds[`past_key_values.${i}.${kind}`] = new ort.Tensor('float32', new Float32Array(0), [1, kv, 0, hd]);
  const ids = BigInt64Array.from({length: prompt}, (_, i) => BigInt((i * 7919) % vocab));
  let total = prompt, times = [], prefill = 0;
  let input = ids;
  let warm = true;  // the first prefill is run twice, the first time untimed
  for (let step = 0; step <= steps; ++step) {
    feeds.input_ids = new ort.Tensor('int64', input, [1, input.length]);
    feeds.attention_mask = new ort.Tensor('int64', new BigInt64Array(total).fill(1n), [1, total]);
    if (wantsPositions)
      feeds.position_ids = new ort.Tensor('int64', BigInt64Array.from({length: input.length}, (_, i) => BigInt(total - input.length + i)),
                                          [1, input.length]);
    if (warm) await session.run(feeds), warm = false;
    const t0 = process.hrtime.bigint();
    const out = await session.run(feeds);
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    if (step === 0) prefill = ms; else times.push(ms);
    const logits = out.logits.data, v = out.logits.dims[2], last = logits.length - v;
    let best = 0;
    for (let j = 1; j < v; ++j) if (logits[last + j] > logits[last + best]) best = j;
    input = BigInt64Array.of(BigInt(best));
    total += 1;
    for (let i = 0; i < layers; ++i)
      for (const kind of ['key', 'value']) feeds[`past_key_values.${i}.${kind}`] = out[`present.${i}.${kind}`];
  }
  times.sort((a, b) => a - b);
  const median = times.length ? times[Math.floor(times.length / 2)] : 0;
  console.log(JSON.stringify({prefill_ms: +prefill.toFixed(3), decode_ms_per_token: +median.toFixed(3), steps}));
}

main().catch((e) => {
  process.stderr.write(`ort_naive_decode.js: error: ${String(e.message || e).split('\n')[0]}\n`);
  process.exit(1);
});
