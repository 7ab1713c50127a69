#!/usr/bin/env node
// ONNX Runtime behind a pipe, so that a Python loop (tools/check_generative_model.py) can run
// many steps on one session without starting Node for each. One JSON request per stdin line:
//   {"model": PATH, "inputs": {NAME: F.npy, ...}, "out_dir": DIR}
// and one JSON reply per stdout line: {"outputs": {NAME: DIR/NAME.npy, ...}} or {"error": "..."}.
// Sessions are created once per model path (threads 1, all graph optimizations).
'use strict';
const path = require('path');
const readline = require('readline');
const {readNpy, writeNpy} = require('./npy');

const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));
const sessions = new Map();

async function session(model) {
  if (!sessions.has(model)) {
    sessions.set(model, await ort.InferenceSession.create(model, {intraOpNumThreads: 1, interOpNumThreads: 1}));
  }
  return sessions.get(model);
}

async function handle(line) {
  const req = JSON.parse(line);
  const s = await session(req.model);
  const feeds = {};
  for (const [name, file] of Object.entries(req.inputs)) {
    const t = readNpy(file);
    feeds[name] = new ort.Tensor(t.dtype, t.data, t.shape);
  }
  const results = await s.run(feeds);
  const outputs = {};
  for (const [name, t] of Object.entries(results)) {
    const file = path.join(req.out_dir, `${name}.npy`);
    writeNpy(file, t.type, t.dims, t.data);
    outputs[name] = file;
  }
  return {outputs};
}

async function main() {
  const rl = readline.createInterface({input: process.stdin, terminal: false});
  for await (const line of rl) {
    if (!line.trim()) continue;
    let reply;
    try {
      reply = await handle(line);
    } catch (e) {
      reply = {error: String(e && e.message ? e.message : e).split('\n')[0]};
    }
    process.stdout.write(JSON.stringify(reply) + '\n');
  }
}

main();
