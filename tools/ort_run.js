#!/usr/bin/env node
// Runs an ONNX model with ONNX Runtime (onnxruntime-node from tools/node_modules): the reference
// for real-model tests and the peer in benchmarks. Options mirror `mminfer run` and `mminfer bench`.
//
//   ort_run.js MODEL --input NAME=F.npy ... [--output-dir DIR] [--threads N]
//   ort_run.js MODEL --bench [--input NAME=F.npy | --shape NAME=1x3x224x224]... [--int-range NAME=LO:HI]
//              [--runs N] [--warmup N] [--threads N] [--opt-level disabled|basic|extended|all]
//   --outputs NAME,...: fetch only these outputs (all by default)
//
// Run mode writes each output as DIR/<output name>.npy. Bench mode prints one JSON line:
// {"median_ms", "p90_ms", "min_ms", "runs", "threads", "load_ms"}.
'use strict';
const fs = require('fs');
const path = require('path');
const {readNpy, writeNpy} = require('./npy');

function usage(code) {
  process.stderr.write(
      'usage: ort_run.js MODEL --input NAME=F.npy ... [--output-dir DIR] [--threads N]\n' +
      '       ort_run.js MODEL --bench [--input NAME=F.npy | --shape NAME=AxB...]... [--int-range NAME=LO:HI]\n' +
      '                  [--runs N] [--warmup N] [--threads N] [--opt-level disabled|basic|extended|all]\n' +
      '       --outputs NAME,...: fetch only these outputs (all by default)\n');
  process.exit(code);
}

function parseArgs(argv) {
  const valued = new Set(['--input', '--output-dir', '--threads', '--shape', '--int-range', '--runs', '--warmup', '--opt-level', '--outputs']);
  const args = {positional: [], multi: {}, flags: new Set()};
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--help' || a === '-h') usage(0);
    if (a === '--bench') {
      args.flags.add(a);
    } else if (valued.has(a)) {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      (args.multi[a] = args.multi[a] || []).push(argv[++i]);
    } else if (a.startsWith('--')) {
      throw new Error(`unknown option ${a}`);
    } else {
      args.positional.push(a);
    }
  }
  if (args.positional.length !== 1) usage(2);
  return args;
}

const last = (args, key, fallback) => (args.multi[key] ? args.multi[key][args.multi[key].length - 1] : fallback);

function intOption(args, key, fallback, min) {
  const v = last(args, key, undefined);
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`${key} expects an integer >= ${min}, got '${v}'`);
  return n;
}

function splitAssignment(spec, what) {
  const eq = spec.indexOf('=');
  if (eq <= 0) throw new Error(`${what} expects NAME=VALUE, got '${spec}'`);
  return [spec.slice(0, eq), spec.slice(eq + 1)];
}

// Deterministic random inputs for bench mode (xorshift; latency does not depend on the values).
function randomTensor(ort, type, shape, range, state) {
  const n = shape.reduce((a, b) => a * b, 1);
  const next = () => {
    state.s ^= state.s << 13; state.s ^= state.s >>> 17; state.s ^= state.s << 5;
    return (state.s >>> 0) / 4294967296;
  };
  const ints = (lo, hi) => Array.from({length: n}, () => lo + Math.floor(next() * (hi - lo)));
  switch (type) {
    case 'float32': return new ort.Tensor(type, Float32Array.from({length: n}, () => next() * 2 - 1), shape);
    case 'int64': return new ort.Tensor(type, BigInt64Array.from(ints(range[0], range[1]), BigInt), shape);
    case 'int32': return new ort.Tensor(type, Int32Array.from(ints(range[0], range[1])), shape);
    case 'bool': return new ort.Tensor(type, Uint8Array.from(ints(0, 2)), shape);
    default: throw new Error(`cannot make random inputs of type ${type}; give the input as .npy`);
  }
}

function percentile(sorted, p) {
  const idx = p * (sorted.length - 1), lo = Math.floor(idx), hi = Math.min(lo + 1, sorted.length - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (idx - lo);
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));
  const threads = intOption(args, '--threads', 0, 0);
  const options = {
    graphOptimizationLevel: last(args, '--opt-level', 'all'),
    executionMode: 'sequential',
    interOpNumThreads: 1,
  };
  if (threads > 0) options.intraOpNumThreads = threads;
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(args.positional[0], options);
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;

  const feeds = {};
  for (const spec of args.multi['--input'] || []) {
    const [name, file] = splitAssignment(spec, '--input');
    if (!session.inputNames.includes(name)) throw new Error(`unknown input '${name}' (model inputs: ${session.inputNames.join(', ')})`);
    const t = readNpy(file);
    feeds[name] = new ort.Tensor(t.dtype, t.data, t.shape);
  }
  const bench = args.flags.has('--bench');
  const fetches = args.multi['--outputs'] ? last(args, '--outputs', '').split(',') : session.outputNames;
  for (const name of fetches)
    if (!session.outputNames.includes(name)) throw new Error(`the model has no output '${name}' (its outputs: ${session.outputNames.join(', ')})`);
  if (bench) {
    const shapes = {}, ranges = {};
    for (const s of args.multi['--shape'] || []) {
      const [n, v] = splitAssignment(s, '--shape');
      shapes[n] = v.split(/[x,]/).map((d) => {
        const k = Number(d);
        if (!Number.isInteger(k) || k < 0) throw new Error(`--shape ${n}: bad shape '${v}'`);
        return k;
      });
    }
    for (const s of args.multi['--int-range'] || []) {
      const [n, v] = splitAssignment(s, '--int-range');
      const [lo, hi] = v.split(':').map(Number);
      if (!Number.isInteger(lo) || !Number.isInteger(hi) || hi <= lo) throw new Error(`--int-range expects NAME=LO:HI, got '${s}'`);
      ranges[n] = [lo, hi];
    }
    const state = {s: 1234};
    session.inputMetadata.forEach((meta) => {
      if (feeds[meta.name]) return;
      let shape = shapes[meta.name];
      if (!shape) {
        if (!meta.shape.every((d) => typeof d === 'number' && d >= 0)) {
          throw new Error(`input '${meta.name}' has a symbolic shape; give it with --shape ${meta.name}=AxB...`);
        }
        shape = meta.shape;
      }
      feeds[meta.name] = randomTensor(ort, meta.type, shape, ranges[meta.name] || [0, 100], state);
    });
  }
  const missing = session.inputNames.filter((n) => !feeds[n]);
  if (missing.length) throw new Error(`missing input(s) ${missing.join(', ')}; give them with --input NAME=F.npy`);

  if (!bench) {
    const results = await session.run(feeds, fetches);
    const dir = last(args, '--output-dir', '.');
    fs.mkdirSync(dir, {recursive: true});
    for (const name of fetches) {
      const t = results[name];
      const file = path.join(dir, name.replace(/[^A-Za-z0-9._-]/g, '_') + '.npy');
      writeNpy(file, t.type, t.dims, t.data);
      console.log(`${name}: ${t.type} [${t.dims.join(', ')}] -> ${file}`);
    }
    return;
  }
  const runs = intOption(args, '--runs', 20, 1), warmup = intOption(args, '--warmup', 3, 0);
  for (let i = 0; i < warmup; ++i) await session.run(feeds, fetches);
  const ms = [];
  for (let i = 0; i < runs; ++i) {
    const s = process.hrtime.bigint();
    await session.run(feeds, fetches);
    ms.push(Number(process.hrtime.bigint() - s) / 1e6);
  }
  ms.sort((a, b) => a - b);
  const r = (x) => Math.round(x * 1e4) / 1e4;
  console.log(JSON.stringify({median_ms: r(percentile(ms, 0.5)), p90_ms: r(percentile(ms, 0.9)), min_ms: r(ms[0]), runs,
                              threads: threads || 'default', load_ms: r(loadMs)}));
}

main().catch((e) => {
  process.stderr.write(`ort_run.js: error: ${e.message}\n`);
  process.exit(1);
});
