#!/usr/bin/python3
"""Checks mminfer's normalization and rotary ops against ONNX Runtime on the same small models:
SimplifiedLayerNormalization, com.microsoft SkipLayerNormalization / SkipSimplifiedLayerNormalization
/ RotaryEmbedding, and ONNX opset-23 RMSNormalization / RotaryEmbedding.

  check_contrib_ops.py --mminfer BIN --work DIR [--node node] [--case SUBSTRING]

Every case writes one model with odd sizes (batch 2, sequence 5, hidden 72) and random inputs,
runs it through tools/ort_run.js and `mminfer run`, and requires for every output ONNX Runtime
gives: same shape and dtype, relative error max|mminfer - ort| / max|ort| <= 1e-5 (float32) or
2e-3 (float16, where one rounding step apart is 1e-3). One more case requires a com.microsoft op
mminfer lacks to fail with one line naming the op and its domain.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from output_compare import errors, load_output, run_mminfer, run_tool, verdict  # noqa: E402

B, S, HIDDEN = 2, 5, 72
MS = "com.microsoft"
FLOAT_TYPES = {np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16, np.int64: TensorProto.INT64}


class Case:
    """One model: a single node whose data inputs are graph inputs and whose weights are
    initializers. `outputs` lists (name, onnx dtype); an empty name skips that output slot."""

    def __init__(self, name, op, domain, inputs, weights, outputs, attrs, opset=17):
        self.name, self.op, self.domain = name, op, domain
        self.inputs, self.weights, self.outputs, self.attrs, self.opset = inputs, weights, outputs, attrs, opset
        self.tail_inputs = []  # data inputs that come after the weights

    def write(self, folder):
        os.makedirs(folder, exist_ok=True)
        node_inputs = []
        graph_inputs, inits, feeds = [], [], {}
        for name, value in self.inputs + self.weights + self.tail_inputs:
            if value is None:
                node_inputs.append("")
                continue
            node_inputs.append(name)
            if any(name == n for n, _ in self.weights):
                inits.append(numpy_helper.from_array(value, name))
            else:
                graph_inputs.append(helper.make_tensor_value_info(name, FLOAT_TYPES[value.dtype.type], list(value.shape)))
                path = os.path.join(folder, name + ".npy")
                np.save(path, value)
                feeds[name] = path
        rank = self.inputs[0][1].ndim  # every output here has the first input's rank
        node = helper.make_node(self.op, node_inputs, [n for n, _ in self.outputs], domain=self.domain, **self.attrs)
        graph = helper.make_graph([node], self.name, graph_inputs,
                                  [helper.make_tensor_value_info(n, t, [None] * rank) for n, t in self.outputs if n], inits)
        imports = [helper.make_opsetid("", self.opset)]
        if self.domain:
            imports.append(helper.make_opsetid(self.domain, 1))
        model = helper.make_model(graph, opset_imports=imports, producer_name="check_contrib_ops")
        model.ir_version = 8 if self.opset <= 17 else 10
        path = os.path.join(folder, "model.onnx")
        save(model, path)
        return path, feeds


def rng_for(name):
    return np.random.default_rng(sum(map(ord, name)))


def rand(rng, shape, dtype=np.float32, scale=1.0, offset=0.0):
    return (rng.standard_normal(shape) * scale + offset).astype(dtype)


def rope_caches(max_pos, half, dtype):
    inv = 1.0 / (10000.0 ** (np.arange(half) / half))
    angles = np.arange(max_pos)[:, None] * inv[None, :]
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def norm_cases():
    f, h = TensorProto.FLOAT, TensorProto.FLOAT16
    cases = []
    for dt, t, tag in [(np.float32, f, "fp32"), (np.float16, h, "fp16")]:
        rng = rng_for("sln" + tag)
        cases.append(Case(f"simplified_ln_{tag}", "SimplifiedLayerNormalization", "",
                          [("x", rand(rng, (B, S, HIDDEN), dt, 2.0, 0.5))], [("scale", rand(rng, (HIDDEN,), dt, 0.3, 1.0))],
                          [("y", t), ("inv_std_var", f)], {"axis": -1, "epsilon": 1e-6}))
    rng = rng_for("sln_axis")
    cases.append(Case("simplified_ln_axis1_y_only", "SimplifiedLayerNormalization", "",
                      [("x", rand(rng, (B, S, HIDDEN)))], [("scale", rand(rng, (S, HIDDEN), np.float32, 0.3, 1.0))],
                      [("y", f)], {"axis": 1, "epsilon": 1e-5}))
    for simplified in (False, True):
        op = "SkipSimplifiedLayerNormalization" if simplified else "SkipLayerNormalization"
        short = "skip_simplified_ln" if simplified else "skip_ln"
        for dt, t, tag in [(np.float32, f, "fp32"), (np.float16, h, "fp16")]:
            rng = rng_for(short + tag)
            x, skip = rand(rng, (B, S, HIDDEN), dt, 1.5, 0.3), rand(rng, (B, S, HIDDEN), dt)
            gamma, beta, bias = rand(rng, (HIDDEN,), dt, 0.2, 1.0), rand(rng, (HIDDEN,), dt, 0.1), rand(rng, (HIDDEN,), dt, 0.1)
            weights = [("gamma", gamma)] + ([] if simplified else [("beta", beta)]) + [("bias", bias)]
            cases.append(Case(f"{short}_{tag}_all_inputs", op, MS, [("input", x), ("skip", skip)], weights,
                              [("output", t), ("", 0), ("", 0), ("input_skip_bias_sum", t)], {"epsilon": 1e-6}))
            # Optional inputs left out, skip repeated over the batch, output only.
            skip2 = rand(rng, (1, S, HIDDEN) if simplified else (S, HIDDEN), dt)
            cases.append(Case(f"{short}_{tag}_broadcast_skip_no_bias", op, MS, [("input", x), ("skip", skip2)],
                              [("gamma", gamma)], [("output", t)], {"epsilon": 1e-5}))
    # Skip with bias but no beta: bias sits at input 4 behind an empty slot.
    rng = rng_for("skip_ln_bias_only")
    cases.append(Case("skip_ln_fp32_bias_without_beta", "SkipLayerNormalization", MS,
                      [("input", rand(rng, (B, S, HIDDEN))), ("skip", rand(rng, (B, S, HIDDEN)))],
                      [("gamma", rand(rng, (HIDDEN,), np.float32, 0.2, 1.0)), ("beta", None), ("bias", rand(rng, (HIDDEN,)))],
                      [("output", f), ("", 0), ("", 0), ("input_skip_bias_sum", f)], {"epsilon": 1e-6}))
    return cases


def rotary_cases():
    f, h = TensorProto.FLOAT, TensorProto.FLOAT16
    cases = []
    max_pos = 16
    # (label, heads, rotary_dim attr or 0, interleaved, rank, offset ids, dtype)
    specs = [("3d_halves", 4, 0, 0, 3, False, np.float32), ("3d_interleaved", 4, 0, 1, 3, False, np.float32),
             ("3d_partial_halves", 4, 8, 0, 3, False, np.float32), ("3d_partial_interleaved", 6, 6, 1, 3, True, np.float32),
             ("4d_halves_offset", 4, 0, 0, 4, True, np.float32), ("4d_partial_interleaved", 4, 10, 1, 4, False, np.float32),
             ("3d_halves_fp16", 4, 0, 0, 3, False, np.float16), ("3d_cache_heads", 0, 0, 0, 3, False, np.float32)]
    for label, heads, rot, inter, rank, offset, dt in specs:
        rng = rng_for("rope" + label)
        n = heads or 4
        d = HIDDEN // n
        half = (rot or d) // 2
        x = rand(rng, (B, S, HIDDEN) if rank == 3 else (B, n, S, d), dt)
        ids = np.array([3], np.int64) if offset else rng.integers(0, max_pos, (B, S)).astype(np.int64)
        cos, sin = rope_caches(max_pos, half, dt)
        attrs = {"interleaved": inter}
        if heads:
            attrs["num_heads"] = heads
        if rot:
            attrs["rotary_embedding_dim"] = rot
        t = f if dt == np.float32 else h
        cases.append(Case(f"rotary_ms_{label}", "RotaryEmbedding", MS, [("input", x), ("position_ids", ids)],
                          [("cos_cache", cos), ("sin_cache", sin)], [("output", t)], attrs))
    # ONNX opset 23: caches before position_ids.
    for label, heads, rot, inter, rank in [("3d_halves", 4, 0, 0, 3), ("4d_partial_interleaved", 4, 10, 1, 4)]:
        rng = rng_for("rope23" + label)
        d = HIDDEN // heads
        half = (rot or d) // 2
        x = rand(rng, (B, S, HIDDEN) if rank == 3 else (B, heads, S, d))
        ids = rng.integers(0, max_pos, (B, S)).astype(np.int64)
        cos, sin = rope_caches(max_pos, half, np.float32)
        attrs = {"interleaved": inter, "num_heads": heads}
        if rot:
            attrs["rotary_embedding_dim"] = rot
        case = Case(f"rotary_onnx23_{label}", "RotaryEmbedding", "", [("input", x)],
                    [("cos_cache", cos), ("sin_cache", sin)], [("output", f)], attrs, opset=23)
        case.tail_inputs = [("position_ids", ids)]
        cases.append(case)
    # ONNX opset 23 without position_ids: the caches hold each token's row, [B, S, rotary_dim / 2].
    rng = rng_for("rope23_no_ids")
    cos, sin = rope_caches(max_pos, 9, np.float32)
    ids = rng.integers(0, max_pos, (B, S))
    cases.append(Case("rotary_onnx23_3d_caches_per_token", "RotaryEmbedding", "", [("input", rand(rng, (B, S, HIDDEN)))],
                      [("cos_cache", cos[ids]), ("sin_cache", sin[ids])], [("output", f)], {"num_heads": 4}, opset=23))
    rng = rng_for("rms23")
    cases.append(Case("rms_norm_onnx23", "RMSNormalization", "", [("x", rand(rng, (B, S, HIDDEN), np.float32, 2.0))],
                      [("scale", rand(rng, (HIDDEN,), np.float32, 0.3, 1.0))], [("y", f)], {"epsilon": 1e-6}, opset=23))
    return cases


def check_case(case, args, root):
    folder = os.path.join(root, case.name)
    model, feeds = case.write(folder)
    ort_dir, mm_dir = os.path.join(folder, "ort"), os.path.join(folder, "mminfer")
    cmd = [args.node, os.path.join(HERE, "ort_run.js"), model, "--output-dir", ort_dir, "--threads", "1"]
    cmd += [a for n, p in feeds.items() for a in ("--input", f"{n}={p}")]
    try:
        run_tool(cmd, "ort_run.js")
        run_mminfer(args.mminfer, model, feeds, mm_dir, threads=2)
    except RuntimeError as e:
        return [f"{case.name}: {e}"]
    failures = []
    for name, dtype in case.outputs:
        if not name:
            continue
        tol = 2e-3 if dtype == TensorProto.FLOAT16 else 1e-5
        try:
            max_abs, rel = errors(load_output(mm_dir, name), load_output(ort_dir, name))
        except RuntimeError as e:
            failures.append(f"{case.name} {name}: {e}")
            continue
        ok = rel <= tol
        print(f"{'ok  ' if ok else 'FAIL'} {case.name} {name}: max abs {max_abs:.3g}, relative {rel:.3g} (tolerance {tol:g})")
        if not ok:
            failures.append(f"{case.name} {name}: relative error {rel:.3g} > {tol:g}")
    return failures


def check_unsupported(args, root):
    """A com.microsoft op without a kernel: one line naming the op and the domain."""
    case = Case("unsupported_ms_op", "QOrderedMatMul", MS, [("a", np.ones((2, 3), np.float32))], [], [("y", TensorProto.FLOAT)], {})
    model, feeds = case.write(os.path.join(root, case.name))
    proc = subprocess.run([args.mminfer, "run", model, "--output-dir", os.path.join(root, case.name, "out")] +
                          [a for n, p in feeds.items() for a in ("--input", f"{n}={p}")],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    msg = proc.stderr.strip()
    if proc.returncode == 0 or "com.microsoft::QOrderedMatMul" not in msg or "not supported" not in msg:
        return [f"unsupported op: exit {proc.returncode}, stderr {msg!r}"]
    print(f"ok   unsupported_ms_op: {msg.splitlines()[-1]}")
    return []


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mminfer", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--node", default="node")
    p.add_argument("--case", default="", help="run only cases whose name holds this")
    args = p.parse_args()
    if not os.path.exists(os.path.join(HERE, "node_modules", "onnxruntime-node", "package.json")):
        print("FAIL: onnxruntime-node is missing; run scripts/bootstrap")
        return 1
    failures = []
    for case in norm_cases() + rotary_cases():
        if args.case in case.name:
            failures += check_case(case, args, args.work)
    if args.case in "unsupported_ms_op":
        failures += check_unsupported(args, args.work)
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
