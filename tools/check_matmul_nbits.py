#!/usr/bin/python3
"""Writes MatMulNBits (com.microsoft) models of many forms and checks `mminfer run` against ONNX
Runtime (tools/ort_run.js) and against numpy's dequantize-then-multiply on each.

  check_matmul_nbits.py --mminfer BIN WORK_DIR [--node node] [--rtol 1e-4]

Each case is one model with three MatMulNBits nodes sharing one weight: A of shape [1, K]
(decode), [7, K] (prefill) and [2, 3, K] (batch dims). Forms: bits 4 and 8; block sizes 16, 32,
128; K a multiple of the block size or not; zero points packed, as floats, or absent; bias or
not. Passes when max|mminfer - reference| <= rtol * max|reference| for every output.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from nbits_quant import quantize, round_int8_blocks  # noqa: E402
from output_compare import errors, load_output, run_mminfer, run_tool, verdict  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

SHAPES = {"A1": [1], "A7": [7], "A23": [2, 3]}


def make_case(path, rng, bits, block, k, n, zp, bias, level):
    """Writes the model; returns {input: array} and {output: numpy reference}."""
    w = rng.standard_normal((k, n)).astype(np.float32)
    b, scales, zpp, deq = quantize(w, bits, block, symmetric=(zp == "none"))
    inits = [numpy_helper.from_array(b, "B"), numpy_helper.from_array(scales, "scales")]
    zp_name = ""
    if zp == "packed":
        inits.append(numpy_helper.from_array(zpp, "zp"))
        zp_name = "zp"
    elif zp == "float":  # the unpacked form: same dtype as A; fractional values are allowed
        blocks = scales.shape[1]
        zf = rng.uniform(0, (1 << bits) - 1, (n, blocks)).astype(np.float32)
        inits.append(numpy_helper.from_array(zf, "zp"))
        zp_name = "zp"
        q = b  # recompute the reference with these zero points
        deq = dequantize(q, scales, zf, bits, block, k)
    bias_v = rng.standard_normal(n).astype(np.float32) if bias else None
    if bias:
        inits.append(numpy_helper.from_array(bias_v, "bias"))
    inputs, outputs, nodes, feeds, expect = [], [], [], {}, {}
    for name, lead in SHAPES.items():
        y = "Y" + name[1:]
        ins = [name, "B", "scales", zp_name, "", "bias" if bias else ""]
        while ins and ins[-1] == "":
            ins.pop()
        nodes.append(helper.make_node("MatMulNBits", ins, [y], domain="com.microsoft", K=k, N=n, bits=bits,
                                      block_size=block, accuracy_level=level, name="mmnb_" + name))
        inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, lead + [k]))
        outputs.append(helper.make_tensor_value_info(y, TensorProto.FLOAT, lead + [n]))
        a = rng.standard_normal(lead + [k]).astype(np.float32)
        feeds[name] = a
        rounded = round_int8_blocks(a.reshape(-1, k), block).reshape(a.shape) if level == 4 else a
        ref = rounded.astype(np.float64) @ deq.astype(np.float64)
        expect[y] = ref + (bias_v if bias else 0)
    graph = helper.make_graph(nodes, "matmul_nbits", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    onnx.save(model, path)
    return feeds, expect


def dequantize(b, scales, zp, bits, block, k):
    """[N, k_blocks, blob] packed codes with float zero points -> [K, N] weights."""
    n, blocks, _ = b.shape
    per = 8 // bits
    codes = np.zeros((n, blocks, block), np.float32)
    for i in range(per):
        codes[:, :, i::per] = (b >> (i * bits)) & ((1 << bits) - 1)
    w = (codes - zp[:, :, None]) * scales[:, :, None]
    return np.ascontiguousarray(w.reshape(n, -1)[:, :k].T)


CASES = [  # bits, block, K, N, zero points, bias, accuracy_level (4: A rounded to int8 per block)
    (4, 32, 64, 48, "none", False, 0),
    (4, 32, 100, 40, "packed", True, 0),
    (4, 16, 72, 33, "packed", False, 0),
    (4, 128, 300, 24, "none", True, 0),
    (4, 64, 130, 17, "float", False, 0),
    (8, 32, 96, 40, "none", False, 0),
    (8, 16, 50, 31, "packed", True, 0),
    (8, 128, 200, 20, "packed", False, 0),
    (4, 32, 100, 40, "packed", True, 4),
    (4, 16, 72, 33, "none", False, 4),
    (4, 64, 130, 17, "packed", False, 4),
    (8, 32, 96, 40, "none", False, 4),
    (8, 16, 50, 31, "packed", True, 4),
    (8, 128, 200, 20, "packed", False, 4),
]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("work")
    p.add_argument("--mminfer", required=True)
    p.add_argument("--node", default="node")
    p.add_argument("--rtol", type=float, default=1e-4)
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rng = np.random.default_rng(17)
    failures = []
    for bits, block, k, n, zp, bias, level in CASES:
        label = f"bits{bits}_block{block}_K{k}_N{n}_zp-{zp}{'_bias' if bias else ''}_level{level}"
        d = os.path.join(args.work, label)
        os.makedirs(d, exist_ok=True)
        model = os.path.join(d, "model.onnx")
        feeds, expect = make_case(model, rng, bits, block, k, n, zp, bias, level)
        files = {}
        for name, a in feeds.items():
            files[name] = os.path.join(d, name + ".npy")
            np.save(files[name], a)
        ort_dir, mm_dir = os.path.join(d, "ort"), os.path.join(d, "mminfer")
        cmd = [args.node, os.path.join(HERE, "ort_run.js"), model, "--output-dir", ort_dir]
        cmd += [x for name, f in files.items() for x in ("--input", f"{name}={f}")]
        try:
            run_tool(cmd, "ort_run.js")
            run_mminfer(args.mminfer, model, files, mm_dir)
        except RuntimeError as e:
            failures.append(f"{label}: {e}")
            continue
        for y, ref in expect.items():
            mm, ort = load_output(mm_dir, y), load_output(ort_dir, y)
            for what, other in (("onnxruntime", ort), ("numpy", ref.astype(np.float32))):
                try:
                    max_abs, rel = errors(mm, other)
                except RuntimeError as e:
                    failures.append(f"{label} {y} vs {what}: {e}")
                    continue
                ok = rel <= args.rtol
                print(f"{'ok  ' if ok else 'FAIL'} {label} {y} vs {what}: relative error {rel:.3g}")
                if not ok:
                    failures.append(f"{label} {y} vs {what}: relative error {rel:.3g} > {args.rtol:g}")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
