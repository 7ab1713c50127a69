#!/usr/bin/env node
// ONNX Runtime as its users transcribe with an Optimum Whisper export: encoder_model.onnx on the
// log-mel features, decoder_model.onnx on the forced prompt, then decoder_with_past_model.onnx one
// token per step with every present fed back (the cross-attention ones kept from the first step).
// Greedy, stops at the end token or --new-tokens. Prints one JSON document: {"encoder_ms",
// "decode_ms" (first step included), "total_ms", "tokens"}, medians over --repeats after a warm-up.
//
//   ort_whisper_bench.js FOLDER FEATURES.npy --prompt ID,ID,... [--new-tokens 64] [--eos ID]
//                        [--threads 1] [--repeats 3]
'use strict';
const fs = require('fs');
const path = require('path');
const {readNpy} = require('./npy.js');

function fail(msg) {
  process.stderr.write(`ort_whisper_bench.js: error: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = {newTokens: 64, threads: 1, repeats: 3, eos: -1, positional: []};
  const numbers = {'--new-tokens': 'newTokens', '--threads': 'threads', '--repeats': 'repeats', '--eos': 'eos'};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (numbers[a] || a === '--prompt') {
      if (i + 1 >= argv.length) fail(`${a} needs a value`);
      const v = argv[++i];
      if (a === '--prompt') {
        opts.prompt = v.split(',').map((x) => (/^\d+$/.test(x) ? Number(x) : fail(`--prompt: '${x}' is not a token id`)));
      } else {
        if (!/^\d+$/.test(v)) fail(`${a} must be a whole number`);
        opts[numbers[a]] = Number(v);
      }
    } else if (a.startsWith('--')) {
      fail(`unknown option ${a}`);
    } else {
      opts.positional.push(a);
    }
  }
  if (opts.positional.length !== 2 || !opts.prompt) fail('usage: FOLDER FEATURES.npy --prompt ID,ID,...');
  return opts;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function argmaxLast(logits) {
  const [, seq, vocab] = logits.dims;
  let best = 0;
  for (let v = 1, base = (seq - 1) * vocab; v < vocab; v++) if (logits.data[base + v] > logits.data[base + best]) best = v;
  return best;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const [folder, featuresPath] = opts.positional;
  const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));
  const session = (name) => {
    const file = path.join(folder, name);
    if (!fs.existsSync(file)) fail(`${file} is missing`);
    return ort.InferenceSession.create(file, {
      intraOpNumThreads: opts.threads, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all'});
  };
  const [encoder, first, withPast] = await Promise.all(
      [session('encoder_model.onnx'), session('decoder_model.onnx'), session('decoder_with_past_model.onnx')]);
  const f = readNpy(featuresPath);
  const features = new ort.Tensor('float32', Float32Array.from(f.data), f.shape);
  const i64 = (values, dims) => new ort.Tensor('int64', BigInt64Array.from(values, BigInt), dims);
  const ms = (a, b) => Number(b - a) / 1e6;

  let tokens = [];
  const enc = [], dec = [];
  for (let r = 0; r <= opts.repeats; r++) {  // the first run warms up and is not counted
    const t0 = process.hrtime.bigint();
    const hidden = (await encoder.run({input_features: features})).last_hidden_state;
    const t1 = process.hrtime.bigint();
    let out = await first.run({input_ids: i64(opts.prompt, [1, opts.prompt.length]), encoder_hidden_states: hidden});
    const past = {};
    for (const [k, v] of Object.entries(out)) if (k.startsWith('present.')) past[k.replace('present', 'past_key_values')] = v;
    tokens = [argmaxLast(out.logits)];
    while (tokens.length < opts.newTokens && tokens[tokens.length - 1] !== opts.eos) {
      out = await withPast.run({input_ids: i64([tokens[tokens.length - 1]], [1, 1]), ...past});
      for (const [k, v] of Object.entries(out)) if (k.startsWith('present.')) past[k.replace('present', 'past_key_values')] = v;
      tokens.push(argmaxLast(out.logits));
    }
    const t2 = process.hrtime.bigint();
    if (r > 0) enc.push(ms(t0, t1)), dec.push(ms(t1, t2));
  }
  process.stdout.write(JSON.stringify({encoder_ms: median(enc), decode_ms: median(dec), total_ms: median(enc) + median(dec),
                                       threads: opts.threads, tokens}) + '\n');
}

main().catch((e) => fail(String(e && e.message ? e.message : e).split('\n')[0]));
