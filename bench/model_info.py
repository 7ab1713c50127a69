#!/usr/bin/python3
"""Prints a model's inputs and its analytic FLOP count as one JSON line.

  model_info.py MODEL.onnx [--shape NAME=1x3x224x224]... [--trace TRACE.json]

FLOPs are counted over MatMul, Gemm and Conv nodes only (2 per multiply-add). Shapes come from
a Chrome trace of one `mminfer bench --opt-level 0 --profile` run when given (exact: the shapes
really executed), else from ONNX shape inference with the inputs fixed. Element-wise work
(softmax, norms, activations) is left out, so GFLOPS figures are the GEMM/conv share.
"""
import json
import sys

import onnx
from onnx import shape_inference


def dims_of(vi):
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim]


def prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def node_flops(op, ins, out, trans_a=0):
    """2 x multiply-adds of one MatMul/Gemm/Conv from its input and output shapes."""
    if op in ("Conv", "ConvInteger"):
        return 2 * prod(out) * prod(ins[1][1:])  # weight [Cout, Cin/group, kh, kw...]
    a = ins[0]
    if op == "Gemm":
        return 2 * prod(out) * (a[0] if trans_a else a[1])
    return 2 * prod(out) * (a[-1] if len(a) > 1 else a[0])


COUNTED = ("MatMul", "Gemm", "Conv", "FusedMatMul", "MatMulInteger", "ConvInteger")


def flops_from_trace(path):
    try:
        events = json.load(open(path))["traceEvents"]
    except (OSError, ValueError, KeyError):
        return None

    def parse(s):
        s = s.strip()
        if s in ("-", ""):
            return None
        return [] if s == "scalar" else [int(x) for x in s.split("x")]

    total = 0
    for e in events:
        args = e.get("args", {})
        op = args.get("op_type")
        if op not in COUNTED or op == "Gemm":  # Gemm's transA is not in the trace; rare in these models
            if op == "Gemm":
                return None
            continue
        ins_s, _, out_s = args.get("shapes", "").partition("->")
        ins = [parse(x) for x in ins_s.split(",")]
        out = parse(out_s.split(",")[0])
        if out is None or any(x is None for x in ins[:2]):
            return None
        total += node_flops(op, ins, out)
    return total


def main():
    args = sys.argv[1:]
    path, shapes, trace = args[0], {}, None
    i = 1
    while i < len(args):
        if args[i] == "--trace":
            trace = args[i + 1]
            i += 2
        elif args[i] == "--shape":
            name, value = args[i + 1].split("=", 1)
            shapes[name] = [int(x) for x in value.replace(",", "x").split("x")]
            i += 2
        else:
            raise SystemExit(f"unknown argument {args[i]}")
    model = onnx.load(path)
    inits = {t.name for t in model.graph.initializer}
    inputs = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        elem = onnx.TensorProto.DataType.Name(vi.type.tensor_type.elem_type).lower()
        inputs.append({"name": vi.name, "dtype": elem, "dims": dims_of(vi)})
        if vi.name in shapes:
            dim = vi.type.tensor_type.shape.dim
            for d, v in zip(dim, shapes[vi.name]):
                d.Clear()
                d.dim_value = v
    if trace:
        flops = flops_from_trace(trace)
        if flops:
            print(json.dumps({"inputs": inputs, "flops": flops, "source": "trace"}))
            return
    try:
        inferred = shape_inference.infer_shapes(model, data_prop=True)
    except Exception as e:  # a model shape inference cannot handle: no FLOP count
        print(json.dumps({"inputs": inputs, "flops": None, "note": str(e).splitlines()[0]}))
        return
    known = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        d = dims_of(vi)
        if d is not None and all(isinstance(x, int) for x in d):
            known[vi.name] = d
    for t in inferred.graph.initializer:
        known[t.name] = list(t.dims)

    flops, uncounted = 0, 0
    for n in inferred.graph.node:
        if n.op_type not in COUNTED:
            continue
        ins = [known.get(x) for x in n.input]
        out = known.get(n.output[0])
        if out is None or any(x is None for x in ins[:2]):
            uncounted += 1
            continue
        trans_a = next((a.i for a in n.attribute if a.name == "transA"), 0)
        flops += node_flops(n.op_type, ins, out, trans_a)
    print(json.dumps({"inputs": inputs, "flops": flops, "uncounted_nodes": uncounted, "source": "shape inference"}))


if __name__ == "__main__":
    main()
