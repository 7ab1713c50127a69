#!/usr/bin/python3
"""Writes ONNX Runtime's dynamic INT8 form of a model, the graph that
onnxruntime.quantization.quantize_dynamic makes with its defaults (per-tensor weights, QInt8,
MatMulConstBOnly), built here with the onnx package alone since the onnxruntime Python wheel is
not installed. The peer for mminfer's --precision int8 in benchmarks.

  quantize_ort_dynamic.py MODEL.onnx OUT.onnx [--force]

Every MatMul whose B is a float initializer of rank 2 becomes
    X_q, X_scale, X_zp = DynamicQuantizeLinear(X)             (uint8, per tensor; one per X)
    Y_i32 = MatMulInteger(X_q, W_q, X_zp, W_zp)                (W_q int8, symmetric: W_zp = 0)
    Y = Mul(Cast(Y_i32, float), Mul(X_scale, W_scale))
and any bias Add after it stays as it was. ONNX Runtime's own graph optimizer then fuses these
into DynamicQuantizeMatMul / MatMulIntegerToFloat, as it does for quantize_dynamic's output.
Other ops (Gemm, Conv, Gather, MatMuls of two activations) stay float, as with MatMul-only
quantization.
"""
import argparse
import os
import sys

import numpy as np


def quantize_weight(w):
    """Symmetric per-tensor int8: scale = max|w| / 127, zero point 0."""
    absmax = float(np.abs(w).max()) if w.size else 0.0
    scale = absmax / 127.0 if absmax > 0 else 1.0
    q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
    return q, np.float32(scale)


def rewrite(model):
    import onnx
    from onnx import helper, numpy_helper

    g = model.graph
    inits = {t.name: t for t in g.initializer}
    taken = {n for node in g.node for n in list(node.input) + list(node.output)} | set(inits) | {i.name for i in g.input}

    def fresh(base):
        name, k = base, 1
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        taken.add(name)
        return name

    quantized_inputs = {}  # activation name -> (q, scale, zp) outputs of its DynamicQuantizeLinear
    new_nodes, count = [], 0
    for node in g.node:
        w = inits.get(node.input[1]) if node.op_type == "MatMul" and node.domain in ("", "ai.onnx") else None
        if w is None or len(w.dims) != 2 or w.data_type != onnx.TensorProto.FLOAT:
            new_nodes.append(node)
            continue
        x = node.input[0]
        if x not in quantized_inputs:
            outs = (fresh(x + "_quantized"), fresh(x + "_scale"), fresh(x + "_zero_point"))
            new_nodes.append(helper.make_node("DynamicQuantizeLinear", [x], list(outs), name=fresh(x + "_QuantizeLinear")))
            quantized_inputs[x] = outs
        xq, xs, xz = quantized_inputs[x]
        wq, ws = quantize_weight(numpy_helper.to_array(w))
        wq_name, ws_name, wz_name = fresh(w.name + "_quantized"), fresh(w.name + "_scale"), fresh(w.name + "_zero_point")
        g.initializer.extend([numpy_helper.from_array(wq, wq_name), numpy_helper.from_array(np.array(ws, np.float32), ws_name),
                              numpy_helper.from_array(np.array(0, np.int8), wz_name)])
        base = node.name or node.output[0]
        y32, yf, scale = fresh(base + "_output_quantized"), fresh(base + "_output_quantized_cast"), fresh(base + "_scales_mul")
        new_nodes += [
            helper.make_node("MatMulInteger", [xq, wq_name, xz, wz_name], [y32], name=fresh(base + "_quant")),
            helper.make_node("Cast", [y32], [yf], to=onnx.TensorProto.FLOAT, name=fresh(base + "_cast")),
            helper.make_node("Mul", [xs, ws_name], [scale], name=fresh(base + "_scales_mul_node")),
            helper.make_node("Mul", [yf, scale], [node.output[0]], name=fresh(base + "_output_scale_mul")),
        ]
        count += 1
    del g.node[:]
    g.node.extend(new_nodes)
    # Float weights no other node reads are dropped, as quantize_dynamic does.
    used = {n for node in g.node for n in node.input}
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    opset = next((o for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is not None and opset.version < 11:
        opset.version = 11  # DynamicQuantizeLinear
    return count


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("out")
    p.add_argument("--force", action="store_true", help="write even when OUT is newer than MODEL")
    args = p.parse_args()
    if not args.force and os.path.isfile(args.out) and os.path.getmtime(args.out) >= os.path.getmtime(args.model):
        print(f"{args.out} is up to date")
        return 0
    import onnx

    model = onnx.load(args.model)
    count = rewrite(model)
    onnx.checker.check_model(model)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    onnx.save(model, args.out)
    print(f"wrote {args.out}: {count} MatMuls in MatMulInteger form")
    return 0


if __name__ == "__main__":
    sys.exit(main())
