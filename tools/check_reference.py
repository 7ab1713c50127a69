#!/usr/bin/python3
"""Runs one exported reference model (see make_reference_models.py) through `mminfer run` and
compares every output of every case with torch's.

  check_reference.py --mminfer BIN MODEL_DIR [--tol 1e-4] [--threads N] [--opt-level L]

Passes when, for each output, max|mminfer - torch| / max(max|torch|, tiny) <= tol (the relative
error of output_compare.py: one scale per output, its largest reference magnitude).
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from output_compare import errors, load_output, run_mminfer  # noqa: E402

import numpy as np  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model_dir")
    p.add_argument("--mminfer", required=True)
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--opt-level", type=int, default=None, help="passed to mminfer run (default: its own)")
    args = p.parse_args()

    with open(os.path.join(args.model_dir, "manifest.json")) as f:
        manifest = json.load(f)
    model = os.path.join(args.model_dir, "model.onnx")
    label = f"{manifest['model']} opset {manifest['opset']}"
    if args.opt_level is not None:
        label += f" O{args.opt_level}"
    failures, worst = 0, 0.0
    with tempfile.TemporaryDirectory(prefix="mminfer-ref-") as tmp:
        for case in manifest["cases"]:
            case_dir = os.path.join(args.model_dir, case)
            inputs = {n: os.path.join(case_dir, "inputs", n + ".npy") for n in manifest["inputs"]}
            shapes = " ".join(f"{n}={'x'.join(map(str, np.load(pth, mmap_mode='r').shape))}" for n, pth in inputs.items())
            out_dir = os.path.join(tmp, case)
            try:
                run_mminfer(args.mminfer, model, inputs, out_dir, args.threads, args.opt_level)
            except RuntimeError as e:
                print(f"FAIL {label} {case} ({shapes}): {e}")
                failures += 1
                continue
            for name in manifest["outputs"]:
                expected = np.load(os.path.join(case_dir, "outputs", name + ".npy"))
                try:
                    max_abs, rel = errors(load_output(out_dir, name), expected)
                except RuntimeError as e:
                    print(f"FAIL {label} {case} {name}: {e}")
                    failures += 1
                    continue
                ok = rel <= args.tol
                worst = max(worst, rel)
                failures += not ok
                print(f"{'ok  ' if ok else 'FAIL'} {label} {case} ({shapes}) {name}: "
                      f"relative error {rel:.3g} (max abs {max_abs:.3g}, tolerance {args.tol:g})")
    print(f"{label}: {'passed' if not failures else f'{failures} failure(s)'}, worst relative error {worst:.3g}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
