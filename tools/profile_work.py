"""The work a profile of mminfer (`mminfer bench --profile TRACE`) executed, counted from the
shapes each op event records.

Two views:
  - per ONNX op (`trace_matmul_flops`): for a profile at --opt-level 0,
    where each MatMul of the file is one event;
  - executed (`trace_executed_flops`, `trace_roofline_seconds`): for a profile at the level that
    is timed, where products are FusedMatMul events and attention one fused event. Only this
    view sees what the optimizer removed, such as the rows no requested output needs.
"""
import json
import math


def trace_shapes(trace, op_type):
    """(input shapes, output shape) of each `op_type` event in a profile, as lists of ints; an
    absent input is an empty list."""
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    for e in events:
        a = e.get("args", {})
        if a.get("op_type") != op_type:
            continue
        ins, _, out = a["shapes"].partition("->")
        shapes = [[] if i.strip() == "-" else [int(x) for x in i.strip().split("x")] for i in ins.split(",")]
        yield shapes, [int(x) for x in out.strip().split("x")]


def trace_matmul_products(trace, op_type="MatMul"):
    """(FLOPs, constant weight bytes) of each MatMul (or FusedMatMul) event: 2 x the output's size
    x the shared dimension; a 2-D second operand is a float32 weight, a batched one (attention's
    products at --opt-level 0) is not."""
    for ins, out in trace_shapes(trace, op_type):
        yield 2 * math.prod(out) * ins[0][-1], math.prod(ins[1]) * 4 if len(ins[1]) == 2 else 0


def trace_conv_products(trace):
    """(FLOPs, weight bytes) of each Conv event: 2 x the output's size x the weight's size per
    output channel (a ViT's patch embedding, which token merging leaves as it is)."""
    for ins, out in trace_shapes(trace, "Conv"):
        yield 2 * math.prod(out) * math.prod(ins[1][1:]), math.prod(ins[1]) * 4


def trace_packed_attention_flops(trace):
    """FLOPs of each fused Attention event that reads Q, K and V out of one packed projection
    ([..., T, Nq + Nk + Nv], inputs 1 and 2 empty; Nq = Nk): the scores, T x T x Nq multiply-adds
    over all heads, and their product with V, T x T x Nv. Any other form raises, so that no
    attention goes uncounted."""
    for ins, out in trace_shapes(trace, "Attention"):
        if ins[1] or ins[2]:
            raise ValueError("an Attention event with separate Q, K and V: its FLOPs are not counted here")
        packed = ins[0]
        rows = math.prod(packed[:-1])
        tokens = packed[-2]
        nv = math.prod(out) // rows
        nq = (packed[-1] - nv) // 2
        yield 2 * rows * tokens * (nq + nv)


def trace_matmul_flops(trace):
    """MatMul FLOPs in a profile."""
    return sum(f for f, _ in trace_matmul_products(trace))


def executed_products(trace):
    """(FLOPs, weight bytes) of every product a profile at the timed level executed: MatMul,
    FusedMatMul, Conv, and fused attention (no weights)."""
    yield from trace_matmul_products(trace)
    yield from trace_matmul_products(trace, "FusedMatMul")
    yield from trace_conv_products(trace)
    for f in trace_packed_attention_flops(trace):
        yield f, 0


def trace_executed_flops(trace):
    """The FLOPs of the products a profile at the timed level executed."""
    return sum(f for f, _ in executed_products(trace))


def trace_roofline_seconds(trace, gflops, gbps):
    """A profile's product time as a roofline predicts it: each event takes the longer of its FLOPs
    at `gflops` and reading its weight at `gbps`. With few rows a product cannot run faster than
    its weights stream from DRAM, however few FLOPs it has left."""
    return sum(max(f / (gflops * 1e9), w / (gbps * 1e9)) for f, w in executed_products(trace))
