#!/usr/bin/env node
// Runs many small models with ONNX Runtime in one process (one Node start instead of one per
// model), for checks that compare dozens of one-node models:
//
//   ort_run_many.js JOBS.json
//
// JOBS.json: [{"model": PATH, "inputs": {NAME: F.npy, ...}, "output_dir": DIR}, ...]. Each job's
// outputs are written as DIR/<output name>.npy, as ort_run.js writes them.
'use strict';
const fs = require('fs');
const path = require('path');
const {readNpy, writeNpy} = require('./npy');

async function main() {
  if (process.argv.length !== 3) {
    process.stderr.write('usage: ort_run_many.js JOBS.json\n');
    process.exit(2);
  }
  const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));
  const jobs = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  for (const job of jobs) {
    const session = await ort.InferenceSession.create(job.model, {graphOptimizationLevel: 'all', executionMode: 'sequential', interOpNumThreads: 1});
    const feeds = {};
    for (const [name, file] of Object.entries(job.inputs)) {
      const t = readNpy(file);
      feeds[name] = new ort.Tensor(t.dtype, t.data, t.shape);
    }
    let results;
    try {
      results = await session.run(feeds);
    } catch (e) {
      throw new Error(`${job.model}: ${e.message}`);
    }
    fs.mkdirSync(job.output_dir, {recursive: true});
    for (const name of session.outputNames) {
      const t = results[name];
      writeNpy(path.join(job.output_dir, name.replace(/[^A-Za-z0-9._-]/g, '_') + '.npy'), t.type, t.dims, t.data);
    }
  }
}

main().catch((e) => {
  process.stderr.write(`ort_run_many.js: error: ${e.message}\n`);
  process.exit(1);
});
