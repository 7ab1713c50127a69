#!/usr/bin/env node
// Runs the OCR peer, @gutenye/ocr-node (PP-OCRv4 det + rec on ONNX Runtime, JS pre/post-processing,
// no direction classifier), on images and prints one JSON line per image in `mminfer ocr --jsonl`'s
// format: {"file", "lines": [{"text", "score", "box": [[x,y] x4]}], "ms"}.
//
//   ocr_peer.js IMAGE... [--threads N] [--models DIR]
//
// ms is the wall time of one Ocr.detect call (decode, det, boxes, rec), measured after one
// untimed warm-up call on the first image. Threads (default 2), as far as the API lets us:
// ONNX Runtime intraOpNumThreads = N, interOpNumThreads = 1, sequential execution (session
// options are the `onnxOptions` that Ocr.create passes to InferenceSession.create); libvips
// (sharp) concurrency = 1; libuv's pool (sharp's async work) = N. opencv-js is single-threaded
// WebAssembly. Models default to models/ppocr, the files mminfer runs.
'use strict';
const path = require('path');

function parseArgs(argv) {
  const args = {images: [], threads: 2, models: path.join(__dirname, '..', 'models', 'ppocr')};
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--threads' || a === '--models') {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      args[a.slice(2)] = argv[++i];
    } else if (a === '--help' || a === '-h' || a.startsWith('--')) {
      throw new Error('usage: ocr_peer.js IMAGE... [--threads N] [--models DIR]');
    } else {
      args.images.push(a);
    }
  }
  args.threads = Number(args.threads);
  if (!Number.isInteger(args.threads) || args.threads < 1) throw new Error('--threads expects an integer >= 1');
  if (!args.images.length) throw new Error('usage: ocr_peer.js IMAGE... [--threads N] [--models DIR]');
  return args;
}

const round1 = (v) => Math.round(v * 10) / 10;

function toLine(line) {
  return {text: line.text, score: Number(line.mean.toFixed(4)), box: (line.box || []).map(([x, y]) => [round1(x), round1(y)])};
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  process.env.UV_THREADPOOL_SIZE = String(args.threads);  // read when the pool first starts
  const sharp = (await import('sharp')).default;
  sharp.concurrency(1);
  const Ocr = (await import('@gutenye/ocr-node')).default;
  const ocr = await Ocr.create({
    models: {
      detectionPath: path.join(args.models, 'ch_PP-OCRv4_det_infer.onnx'),
      recognitionPath: path.join(args.models, 'ch_PP-OCRv4_rec_infer.onnx'),
      dictionaryPath: path.join(args.models, 'ppocr_keys_v1.txt'),
    },
    onnxOptions: {intraOpNumThreads: args.threads, interOpNumThreads: 1, executionMode: 'sequential'},
  });
  await ocr.detect(args.images[0]);  // warm-up
  for (const file of args.images) {
    let record;
    try {
      const start = process.hrtime.bigint();
      const lines = await ocr.detect(file);
      const ms = Number(process.hrtime.bigint() - start) / 1e6;
      record = {file, lines: lines.map(toLine), ms: Number(ms.toFixed(2))};
    } catch (e) {
      record = {file, error: String(e.message || e)};
    }
    process.stdout.write(JSON.stringify(record) + '\n');
  }
}

main().catch((e) => {
  process.stderr.write(`ocr_peer.js: ${e.message || e}\n`);
  process.exit(1);
});
