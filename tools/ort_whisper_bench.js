#!/usr/bin/env node
// ONNX Runtime as its users transcribe with an Optimum Whisper export: encoder_model.onnx on the
// log-mel features, decoder_model.onnx on the forced prompt, then decoder_with_past_model.onnx one
// token per step with every present fed back (the cross-attention ones kept from the first step).
// Greedy, stops at the end token or --new-tokens. With --beams N > 1 it is beam search as
// transformers' generate(num_beams=N) runs it: the encoder output repeated to N rows, the
// self-attention presents copied into the chosen beams' order each step, and the hypotheses kept
// and ranked by mminfer's rule (src/generate/beam_search.cpp), so the tokens can be compared.
// Prints one JSON document: {"encoder_ms", "decode_ms" (first step included), "total_ms",
// "threads", "beams", "tokens"}, medians over --repeats after a warm-up.
//
//   ort_whisper_bench.js FOLDER FEATURES.npy --prompt ID,ID,... [--new-tokens 64] [--eos ID]
//                        [--threads 1] [--repeats 3] [--beams 1]
'use strict';
const fs = require('fs');
const path = require('path');
const {readNpy} = require('./npy.js');

function fail(msg) {
  process.stderr.write(`ort_whisper_bench.js: error: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = {newTokens: 64, threads: 1, repeats: 3, eos: -1, beams: 1, positional: []};
  const numbers = {'--new-tokens': 'newTokens', '--threads': 'threads', '--repeats': 'repeats', '--eos': 'eos',
                   '--beams': 'beams'};
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
  if (opts.beams < 1 || opts.newTokens < 1) fail('--beams and --new-tokens must be at least 1');
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

// exp(y) for y <= 0 in about a third of Math.exp's time (relative error ~1e-12): 2^-(n/64) from
// tables times a short series. Math.exp on 5 x 51,865 logits a step cost several times the
// vectorised log_softmax a transformers user's loop pays: it would have slowed ONNX Runtime's side.
const EXP_SCALE = 64 / Math.LN2;
const POW2_INT = Float64Array.from({length: 80}, (_, k) => 2 ** -k);
const POW2_FRAC = Float64Array.from({length: 64}, (_, j) => 2 ** (-j / 64));
function expNonPositive(y) {
  if (y < -50) return 0;  // too small to move a sum that holds the max's own 1
  const t = -y * EXP_SCALE, n = t | 0, r = (t - n) / EXP_SCALE;
  return POW2_INT[n >> 6] * POW2_FRAC[n & 63] * (1 - r * (1 - r * (0.5 - r * (1 / 6 - r / 24))));
}

// out[at + v] = log_softmax(data[base .. base + vocab])[v] + score, in float32 as mminfer has it.
function logSoftmaxPlus(data, base, vocab, score, out, at) {
  let max = -Infinity, sum = 0;
  for (let v = base; v < base + vocab; v++) if (data[v] > max) max = data[v];
  for (let v = base; v < base + vocab; v++) sum += expNonPositive(data[v] - max);
  const norm = max + Math.log(sum), shift = at - base;
  for (let v = base; v < base + vocab; v++) out[v + shift] = Math.fround(data[v] - norm) + score;
}

// The `keep` best of cand[from .. from + count] as indices, best first, ties to the lower index,
// through a short sorted list: one comparison per candidate once it is full.
function rowBest(cand, from, count, keep) {
  const best = [];
  for (let i = from; i < from + count; i++) {
    if (best.length === keep && !(cand[i] > cand[best[keep - 1]])) continue;
    if (best.length === keep) best.pop();
    let at = best.length;
    while (at > 0 && cand[i] > cand[best[at - 1]]) at--;  // indices rise: an equal one stays after
    best.splice(at, 0, i);
  }
  return best;
}

// Beam search bookkeeping by mminfer's rule (src/generate/beam_search.cpp, itself Hugging Face's
// BeamSearchScorer): float32 scores, the top 2 * beams (row, token) candidates, ties to the lower
// row then token; an EOS among the first `beams` ends a hypothesis ranked by its sum / generated
// length (length penalty 1, the EOS counted); heuristic early stopping.
class Beams {
  constructor(beams, promptLength, maxLength, eos) {
    Object.assign(this, {beams, promptLength, maxLength, eos, length: promptLength});
    this.sequences = Array.from({length: beams}, () => []);  // the generated tokens of each row
    this.scores = Float32Array.from({length: beams}, (_, k) => (k === 0 ? 0 : -1e9));  // one live beam at first
    this.kept = [];  // finished hypotheses: {tokens, score}, at most `beams`
    this.worst = 1e9;
    this.finished = false;
  }

  add(tokens, sum, generated) {
    const score = Math.fround(sum / generated);
    if (this.kept.length >= this.beams && !(score > this.worst)) return;
    this.kept.push({tokens, score});
    if (this.kept.length > this.beams) {
      let worst = 0;  // the earliest added among equals goes
      for (let i = 1; i < this.kept.length; i++) if (this.kept[i].score < this.kept[worst].score) worst = i;
      this.kept.splice(worst, 1);
      this.worst = Math.min(...this.kept.map((h) => h.score));
    } else {
      this.worst = Math.min(this.worst, score);
    }
  }

  // logits: [beams, seq, vocab]; returns the source row of each next beam, its token in this.next.
  step(logits) {
    const [rows, seq, vocab] = logits.dims, keep = 2 * this.beams, data = logits.data;
    // One buffer for every step rather than a fresh megabyte each.
    if (!this.cand || this.cand.length !== rows * vocab) this.cand = new Float32Array(rows * vocab);
    const cand = this.cand;
    for (let r = 0; r < rows; r++) logSoftmaxPlus(data, (r * seq + seq - 1) * vocab, vocab, this.scores[r], cand, r * vocab);
    let all = [];
    for (let r = 0; r < rows; r++) all = all.concat(rowBest(cand, r * vocab, vocab, keep));
    all.sort((x, y) => cand[y] - cand[x] || x - y);
    const sources = [], next = [], scores = new Float32Array(this.beams), sequences = [];
    this.length++;
    for (let rank = 0; rank < keep && next.length < this.beams; rank++) {
      const parent = Math.floor(all[rank] / vocab), token = all[rank] % vocab;
      if (token === this.eos) {
        if (rank < this.beams) this.add([...this.sequences[parent], token], cand[all[rank]], this.length - this.promptLength);
        continue;
      }
      scores[next.length] = cand[all[rank]];
      sources.push(parent), next.push(token), sequences.push([...this.sequences[parent], token]);
    }
    this.finished = this.kept.length >= this.beams &&
                    this.worst >= Math.fround(cand[all[0]] / (this.length - this.promptLength));
    Object.assign(this, {scores, sequences, next});
    return sources;
  }

  done() { return this.finished || this.length >= this.maxLength; }

  best() {
    if (!this.finished) for (let k = 0; k < this.beams; k++) this.add(this.sequences[k], this.scores[k], this.sequences[k].length);
    return this.kept.reduce((a, h) => (h.score > a.score ? h : a)).tokens;  // the first best, as a stable sort
  }
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
  const pasts = (out, past = {}) => {
    for (const [k, v] of Object.entries(out)) if (k.startsWith('present.')) past[k.replace('present', 'past_key_values')] = v;
    return past;
  };

  const greedy = async (hidden) => {
    let out = await first.run({input_ids: i64(opts.prompt, [1, opts.prompt.length]), encoder_hidden_states: hidden});
    const past = pasts(out);
    const tokens = [argmaxLast(out.logits)];
    while (tokens.length < opts.newTokens && tokens[tokens.length - 1] !== opts.eos) {
      out = await withPast.run({input_ids: i64([tokens[tokens.length - 1]], [1, 1]), ...past});
      pasts(out, past);
      tokens.push(argmaxLast(out.logits));
    }
    return tokens;
  };

  const beam = async (hidden) => {
    const n = opts.beams, len = opts.prompt.length;
    // The one clip's encoder output repeated to every beam, as _expand_inputs_for_generation does.
    const rows = new Float32Array(hidden.data.length * n);
    for (let k = 0; k < n; k++) rows.set(hidden.data, k * hidden.data.length);
    const states = new ort.Tensor('float32', rows, [n, ...hidden.dims.slice(1)]);
    let out = await first.run({input_ids: i64(Array(n).fill(opts.prompt).flat(), [n, len]), encoder_hidden_states: states});
    const past = pasts(out);  // the cross-attention ones stay as they are: every row holds the same
    const search = new Beams(n, len, len + opts.newTokens, opts.eos);
    for (;;) {
      const sources = search.step(out.logits);
      if (search.done()) break;
      // The self-attention presents in the chosen beams' order (index_select along the batch).
      for (const [name, t] of Object.entries(past)) {
        if (!name.includes('.decoder.')) continue;
        const size = t.data.length / n, copy = new Float32Array(t.data.length);
        sources.forEach((s, r) => copy.set(t.data.subarray(s * size, (s + 1) * size), r * size));
        past[name] = new ort.Tensor('float32', copy, t.dims);
      }
      out = await withPast.run({input_ids: i64(search.next, [n, 1]), ...past});
      pasts(out, past);
    }
    return search.best();
  };

  let tokens = [];
  const enc = [], dec = [];
  for (let r = 0; r <= opts.repeats; r++) {  // the first run warms up and is not counted
    const t0 = process.hrtime.bigint();
    const hidden = (await encoder.run({input_features: features})).last_hidden_state;
    const t1 = process.hrtime.bigint();
    tokens = await (opts.beams > 1 ? beam : greedy)(hidden);
    const t2 = process.hrtime.bigint();
    if (r > 0) enc.push(ms(t0, t1)), dec.push(ms(t1, t2));
  }
  process.stdout.write(JSON.stringify({encoder_ms: median(enc), decode_ms: median(dec), total_ms: median(enc) + median(dec),
                                       threads: opts.threads, beams: opts.beams, tokens}) + '\n');
}

main().catch((e) => fail(String(e && e.message ? e.message : e).split('\n')[0]));
