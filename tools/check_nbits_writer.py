#!/usr/bin/python3
"""Checks `mminfer optimize --quantize int4|int8w`: an FP32 model with three MatMuls (two sharing
one weight, one weight with K not a multiple of the block) is rewritten; the result must hold
MatMulNBits nodes only, run in ONNX Runtime (tools/ort_run.js) and in mminfer with the same
outputs (max relative error <= 1e-4), and stay within the quantization bound of the FP32 model:
per output, |y_q - y| <= sum_k |a_k| * |scale(n, block of k)| * step, step = 1/2 (a value
clipped at the top code, symmetric only: 1). The writer's default accuracy_level 4 lets both
runtimes round A to int8 per block (nodes must carry it); the bound then takes the rounded a_k
and adds sum_k |a_k - rounded a_k| * |w_kn|. One file written with --accuracy-level 0 keeps FP32
activations and the plain bound.

  check_nbits_writer.py --mminfer BIN WORK_DIR [--node node]
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from nbits_quant import round_int8_blocks  # noqa: E402
from output_compare import errors, load_output, run_mminfer, run_tool, verdict  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

K1, N1, K2, N2 = 96, 64, 64, 40  # Y1 = A W1, Y2 = relu(A W1) W2 ... shapes below
M = 5


def make_model(path, rng):
    w1 = rng.standard_normal((K1, N1)).astype(np.float32)
    w2 = rng.standard_normal((N1, N2)).astype(np.float32) * 0.1
    w3 = rng.standard_normal((K1 + 4, N2)).astype(np.float32)  # K = 100: not whole blocks
    nodes = [
        helper.make_node("MatMul", ["A", "W1"], ["Y1"], name="mm1"),
        helper.make_node("MatMul", ["A2", "W1"], ["Y1b"], name="mm1_shared"),
        helper.make_node("MatMul", ["Y1", "W2"], ["Y2"], name="mm2"),
        helper.make_node("MatMul", ["B", "W3"], ["Y3"], name="mm3"),
    ]
    inputs = [helper.make_tensor_value_info("A", TensorProto.FLOAT, [M, K1]),
              helper.make_tensor_value_info("A2", TensorProto.FLOAT, [1, K1]),
              helper.make_tensor_value_info("B", TensorProto.FLOAT, [2, 3, K1 + 4])]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y1", "Y1b", "Y2", "Y3")]
    inits = [numpy_helper.from_array(w, n) for w, n in ((w1, "W1"), (w2, "W2"), (w3, "W3"))]
    model = helper.make_model(helper.make_graph(nodes, "mlp", inputs, outputs, inits), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    feeds = {"A": rng.standard_normal((M, K1)).astype(np.float32),
             "A2": rng.standard_normal((1, K1)).astype(np.float32),
             "B": rng.standard_normal((2, 3, K1 + 4)).astype(np.float32)}
    return feeds


def bound(a, node, inits, symmetric, w):
    """Per-output bound of |A_q W_q - A W| for one MatMulNBits node (A_q = A at level 0)."""
    attrs = {a.name: a.i for a in node.attribute}
    k, block = attrs["K"], attrs["block_size"]
    scales = np.abs(numpy_helper.to_array(inits[node.input[2]])).reshape(attrs["N"], -1)
    per_k = scales[:, np.arange(k) // block].T  # [K, N]
    step = 1.0 if symmetric else 0.5
    a = a.reshape(-1, k).astype(np.float64)
    if attrs.get("accuracy_level", 0) != 4:
        return np.abs(a) @ per_k * step
    rounded = round_int8_blocks(a.astype(np.float32), block).astype(np.float64)
    return np.abs(rounded) @ per_k * step + np.abs(a - rounded) @ np.abs(w.astype(np.float64))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("work")
    p.add_argument("--mminfer", required=True)
    p.add_argument("--node", default="node")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rng = np.random.default_rng(5)
    fp32 = os.path.join(args.work, "fp32.onnx")
    feeds = make_model(fp32, rng)
    files = {}
    for name, a in feeds.items():
        files[name] = os.path.join(args.work, name + ".npy")
        np.save(files[name], a)
    failures = []
    ref_dir = os.path.join(args.work, "fp32_out")
    run_mminfer(args.mminfer, fp32, files, ref_dir)
    fp32_model = onnx.load(fp32)
    weights = {t.name: numpy_helper.to_array(t) for t in fp32_model.graph.initializer}
    weight_of = {n.output[0]: weights[n.input[1]] for n in fp32_model.graph.node}
    for quant, block, sym, level in (("int4", 32, False, 4), ("int4", 16, True, 4), ("int8w", 64, False, 4),
                                     ("int8w", 32, True, 4), ("int4", 32, False, 0)):
        label = f"{quant}_block{block}{'_sym' if sym else ''}{'_level0' if level == 0 else ''}"
        out = os.path.join(args.work, label + ".onnx")
        cmd = [args.mminfer, "optimize", fp32, "-o", out, "--quantize", quant, "--block-size", str(block)]
        cmd += ["--symmetric"] if sym else []
        cmd += ["--accuracy-level", "0"] if level == 0 else []
        try:
            print(run_tool(cmd, "mminfer optimize").strip())
        except RuntimeError as e:
            failures.append(f"{label}: {e}")
            continue
        model = onnx.load(out)
        ops = [n.op_type for n in model.graph.node]
        if ops.count("MatMulNBits") != 4 or "MatMul" in ops:
            failures.append(f"{label}: nodes {ops}, expected 4 MatMulNBits")
            continue
        levels = {a.i for n in model.graph.node for a in n.attribute if a.name == "accuracy_level"} or {0}
        if levels != {level}:
            failures.append(f"{label}: accuracy_level {sorted(levels)}, expected {level}")
        if len(model.graph.initializer) != 3 * (2 if sym else 3):
            failures.append(f"{label}: {len(model.graph.initializer)} initializers; the shared weight must be written once")
        inits = {t.name: t for t in model.graph.initializer}
        ort_dir, mm_dir = os.path.join(args.work, label + "_ort"), os.path.join(args.work, label + "_mminfer")
        cmd = [args.node, os.path.join(HERE, "ort_run.js"), out, "--output-dir", ort_dir]
        cmd += [x for name, f in files.items() for x in ("--input", f"{name}={f}")]
        try:
            run_tool(cmd, "ort_run.js")
            run_mminfer(args.mminfer, out, files, mm_dir)
        except RuntimeError as e:
            failures.append(f"{label}: {e}")
            continue
        by_output = {n.output[0]: n for n in model.graph.node}
        for y in ("Y1", "Y1b", "Y2", "Y3"):
            mm, ort, ref = (load_output(d, y) for d in (mm_dir, ort_dir, ref_dir))
            _, rel = errors(mm, ort)
            ok = rel <= 1e-4
            print(f"{'ok  ' if ok else 'FAIL'} {label} {y}: mminfer vs onnxruntime relative error {rel:.3g}")
            if not ok:
                failures.append(f"{label} {y}: mminfer vs onnxruntime relative error {rel:.3g} > 1e-4")
            if y == "Y2":
                continue  # two quantized layers deep: the one-layer bound does not apply
            node = by_output[y]
            a = feeds[node.input[0]]
            lim = bound(a, node, inits, sym, weight_of[y]).reshape(mm.shape)
            excess = float((np.abs(mm.astype(np.float64) - ref) - lim * 1.001 - 1e-5).max())
            worst = float((np.abs(mm - ref) / np.maximum(lim, 1e-12)).max())
            ok = excess <= 0
            print(f"{'ok  ' if ok else 'FAIL'} {label} {y}: error vs FP32 at most {worst:.2f} of the quantization bound")
            if not ok:
                failures.append(f"{label} {y}: error vs FP32 exceeds the quantization bound by {excess:.3g}")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
