#!/usr/bin/python3
"""Static INT8 calibrated through a pipeline's own preprocessing: `mminfer optimize TOWER.onnx
--calib DIR --calib-pipeline PIPELINE` on a CLIP pipeline folder, for both towers, with DIR
holding the folder's reference images and its texts in .txt files. Checks that
  - each tower's file has QDQ pairs and the report INT8 layers, its outputs within
    --min-cosine of FP32 on the inputs the pipeline itself made (no --shape given);
  - a set the tower never sees (only texts for the image tower) is a one-line error.

  check_calib_pipeline.py --mminfer BIN --pipeline DIR --work DIR [--min-cosine 0.99]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from output_compare import run_tool, verdict  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mminfer", required=True)
    p.add_argument("--pipeline", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--min-cosine", type=float, default=0.99)
    args = p.parse_args()
    import onnx

    calib, texts_only = os.path.join(args.work, "calib"), os.path.join(args.work, "texts-only")
    for d in (calib, texts_only):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    ref = os.path.join(args.pipeline, "reference")
    for f in sorted(os.listdir(os.path.join(ref, "images"))):
        shutil.copy(os.path.join(ref, "images", f), calib)
    texts = [t["text"] if isinstance(t, dict) else t for t in json.load(open(os.path.join(ref, "expected.json")))["texts"]]
    for d in (calib, texts_only):
        with open(os.path.join(d, "captions.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(texts) + "\n")

    failures = []
    for tower in ("vision", "text"):
        out, report = os.path.join(args.work, f"{tower}.int8.onnx"), os.path.join(args.work, f"{tower}.json")
        run_tool([args.mminfer, "optimize", os.path.join(args.pipeline, f"{tower}.onnx"), "-o", out, "--calib", calib,
                  "--calib-pipeline", args.pipeline, "--calib-method", "entropy", "--report", report, "--threads", "2"],
                 f"mminfer optimize {tower}")
        r = json.load(open(report))
        pairs = sum(1 for n in onnx.load(out).graph.node if n.op_type == "QuantizeLinear")
        print(f"{tower}: {len(r['int8_layers'])} INT8 layers, {pairs} QuantizeLinear, min cosine {r['min_cosine']:.6f}")
        if not r["int8_layers"] or pairs == 0:
            failures.append(f"{tower}: no INT8 layers written ({len(r['int8_layers'])} in the report, {pairs} QuantizeLinear)")
        if not (r["min_cosine"] >= args.min_cosine):
            failures.append(f"{tower}: cosine to FP32 {r['min_cosine']} below {args.min_cosine}")
    res = subprocess.run([args.mminfer, "optimize", os.path.join(args.pipeline, "vision.onnx"), "-o",
                          os.path.join(args.work, "bad.onnx"), "--calib", texts_only, "--calib-pipeline", args.pipeline],
                         capture_output=True, text=True)
    lines = res.stderr.strip().splitlines()
    if res.returncode == 0 or len(lines) != 1 or "never computed" not in lines[0]:
        failures.append(f"texts for the image tower: expected one line saying 'never computed', got rc {res.returncode}: "
                        f"{res.stderr.strip()!r}")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
