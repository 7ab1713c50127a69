#!/usr/bin/python3
"""A model whose float weights are stored as FP16 initializers behind Cast nodes (the form FP16
converters write when they keep float32 inputs and outputs) runs in mminfer: the Casts fold at
load (no Cast is left in `mminfer inspect --optimized`), and the outputs match ONNX Runtime on
the same file within --atol.

  check_fp16_weights.py --mminfer BIN --work DIR [--make clip_vision] [--node node] [--atol 1e-4]
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from check_precision_accuracy import ensure_model  # noqa: E402
from output_compare import load_output, run_tool, verdict  # noqa: E402

import numpy as np  # noqa: E402


def to_fp16_weights(src, dst):
    """Every float32 initializer of more than 16 values becomes FP16 plus a Cast back; returns how many."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(src)
    g = model.graph
    casts, halves = [], []
    for t in list(g.initializer):
        a = numpy_helper.to_array(t)
        if a.dtype != np.float32 or a.size <= 16:
            continue
        halves.append(numpy_helper.from_array(a.astype(np.float16), t.name + "_fp16"))
        casts.append(helper.make_node("Cast", [t.name + "_fp16"], [t.name], to=TensorProto.FLOAT, name=t.name + "_to_float"))
        g.initializer.remove(t)
    g.initializer.extend(halves)
    nodes = list(g.node)
    del g.node[:]
    g.node.extend(casts + nodes)
    onnx.checker.check_model(model)
    onnx.save(model, dst)
    return len(casts)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mminfer", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--make", default="clip_vision", choices=["clip_vision"])
    p.add_argument("--node", default="node")
    p.add_argument("--atol", type=float, default=1e-4)
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    model = os.path.join(args.work, "fp16_weights.onnx")
    count = to_fp16_weights(ensure_model(args.make, args.work), model)
    x = np.random.default_rng(5).standard_normal((3, 3, 96, 96)).astype(np.float32)
    np.save(os.path.join(args.work, "pixel_values.npy"), x)
    outs = {}
    for label, cmd in (("mminfer", [args.mminfer, "run", model, "--threads", "2"]),
                       ("ort", [args.node, os.path.join(HERE, "ort_run.js"), model, "--threads", "2"])):
        out_dir = os.path.join(args.work, label)
        run_tool(cmd + ["--input", f"pixel_values={os.path.join(args.work, 'pixel_values.npy')}", "--output-dir", out_dir],
                 label)
        outs[label] = {n: load_output(out_dir, n) for n in ("last_hidden_state", "image_embeds")}
    failures = []
    for name in ("last_hidden_state", "image_embeds"):
        diff = float(np.abs(outs["mminfer"][name] - outs["ort"][name]).max())
        print(f"{name}: max abs difference to ONNX Runtime {diff:.3g} ({count} FP16 weights)")
        if not diff <= args.atol:
            failures.append(f"{name} differs by {diff}")
    graph = subprocess.run([args.mminfer, "inspect", "--optimized", model], capture_output=True, text=True, check=True).stdout
    left = [line for line in graph.splitlines() if line.strip().startswith("Cast ")]
    if left:
        failures.append(f"{len(left)} Cast nodes left after optimization, e.g. {left[0].strip()}")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
