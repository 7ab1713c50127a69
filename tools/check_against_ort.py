#!/usr/bin/python3
"""Runs one model through `mminfer run` and through ONNX Runtime (tools/ort_run.js) on the same
inputs and compares every output.

  check_against_ort.py --mminfer BIN MODEL --input NAME=F.npy ... [--atol 1e-3] [--threads N]

Passes when max|mminfer - onnxruntime| <= atol for every output (absolute error: the outputs of
the OCR models are probabilities in [0, 1]).
"""
import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from output_compare import errors, load_output, run_mminfer, run_tool  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("--mminfer", required=True)
    p.add_argument("--input", action="append", default=[], help="NAME=FILE.npy")
    p.add_argument("--atol", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--node", default="node")
    args = p.parse_args()

    label = os.path.basename(args.model)
    for path in [args.model, os.path.join(HERE, "node_modules", "onnxruntime-node", "package.json")]:
        if not os.path.exists(path):
            print(f"FAIL {label}: {path} is missing; run scripts/bootstrap")
            return 1
    inputs = dict(spec.split("=", 1) for spec in args.input)
    with tempfile.TemporaryDirectory(prefix="mminfer-ort-") as tmp:
        ort_dir, mm_dir = os.path.join(tmp, "ort"), os.path.join(tmp, "mminfer")
        cmd = [args.node, os.path.join(HERE, "ort_run.js"), args.model, "--output-dir", ort_dir]
        cmd += [a for n, f in inputs.items() for a in ("--input", f"{n}={f}")]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        names = [line.split(":")[0] for line in run_tool(cmd, "ort_run.js").splitlines() if "->" in line]
        try:
            run_mminfer(args.mminfer, args.model, inputs, mm_dir, args.threads)
        except RuntimeError as e:
            print(f"FAIL {label}: {e}")
            return 1
        failures = 0
        for name in names:
            try:
                max_abs, rel = errors(load_output(mm_dir, name), load_output(ort_dir, name))
            except RuntimeError as e:
                print(f"FAIL {label} {name}: {e}")
                failures += 1
                continue
            ok = max_abs <= args.atol
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {label} {name}: max abs error {max_abs:.3g} "
                  f"(relative {rel:.3g}, tolerance {args.atol:g})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
