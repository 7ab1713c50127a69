#!/usr/bin/python3
"""Hostile values in the inputs that ops turn into indices, sizes or loop counts: NaN, infinities,
huge, negative and zero values in ROI corners, Resize scales and sizes, Range limits, GridSample
grids, NMS boxes, TopK's k, shapes, repeats, pads, OneHot depths, gather and scatter indices,
Slice steps, Split sizes, integer division by zero, casts of non-finite floats.

Each case is a one-node model run by `mminfer run` under an 8 GB address-space limit. It must end
within 30 s in either a result (exit 0) or one error line naming the node and its op (exit 1):
never a signal, a hang or another exit code. Where a case names what its error must say, it says
that. The contrib ops of generative models get the same: RotaryEmbedding positions past its
caches, GroupQueryAttention sequence lengths that do not fit its cache.

  hostile_op_inputs.py MMINFER WORK
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

NAN, INF = np.nan, np.inf


def f32(*v):
    return np.array(v, np.float32)


def i64(*v):
    return np.array(v, np.int64)


def cases():
    """(name, op, [(input name, array or None)], attributes, outputs, opset, domain, expected error
    words or None)."""
    rng = np.random.default_rng(0)
    x = rng.random((1, 2, 8, 8), dtype=np.float32)
    v = rng.random((2, 5), dtype=np.float32)
    out = []

    def add(name, op, inputs, attrs=None, outputs=1, opset=17, domain="", expect=None):
        out.append((name, op, inputs, attrs or {}, outputs, opset, domain, expect))

    for tag, box in [("nan", f32(NAN, 0, 4, 4)), ("inf", f32(0, 0, INF, INF)), ("huge", f32(0, 0, 1e12, 1e12)),
                     ("neghuge", f32(-1e30, -1e30, 1e30, 1e30))]:
        for ratio in (0, 2):
            add(f"roialign_r{ratio}_{tag}", "RoiAlign", [("x", x), ("rois", box.reshape(1, 4)), ("b", i64(0))],
                {"output_height": 2, "output_width": 2, "sampling_ratio": ratio})
        add(f"maxroipool_{tag}", "MaxRoiPool", [("x", x), ("rois", np.concatenate([f32(0), box]).reshape(1, 5))],
            {"pooled_shape": [2, 2]})
    add("roialign_batch", "RoiAlign", [("x", x), ("rois", f32(0, 0, 4, 4).reshape(1, 4)), ("b", i64(7))])
    add("maxroipool_batch_nan", "MaxRoiPool", [("x", x), ("rois", f32(NAN, 0, 0, 4, 4).reshape(1, 5))],
        {"pooled_shape": [2, 2]})
    for tag, s in [("nan", f32(1, 1, NAN, 2)), ("inf", f32(1, 1, INF, 2)), ("huge", f32(1, 1, 1e9, 1e9)),
                   ("zero", f32(1, 1, 0, 0)), ("neg", f32(1, 1, -2, 2))]:
        add(f"resize_scales_{tag}", "Resize", [("x", x), ("roi", None), ("scales", s)], {"mode": "linear"})
    for tag, s in [("huge", i64(1, 2, 1 << 40, 8)), ("neg", i64(1, 2, -3, 8)), ("zero", i64(1, 2, 0, 8))]:
        add(f"resize_sizes_{tag}", "Resize", [("x", x), ("roi", None), ("scales", None), ("sizes", s)])
    add("upsample_nan", "Upsample", [("x", x), ("s", f32(1, 1, NAN, 2))], {"mode": "nearest"}, opset=9)
    for tag, (start, limit, delta) in {"nan": (0, NAN, 1), "inf": (0, INF, 1), "zero_delta": (0, 10, 0),
                                       "huge": (0, 1e15, 1)}.items():
        add(f"range_{tag}", "Range", [("s", np.float32(start)), ("l", np.float32(limit)), ("d", np.float32(delta))])
    add("range_int_huge", "Range", [("s", np.int64(0)), ("l", np.int64(1 << 60)), ("d", np.int64(1))])
    add("range_int_overflow", "Range", [("s", np.int64(-(1 << 62))), ("l", np.int64(1 << 62)), ("d", np.int64(1 << 62))])
    grid = rng.random((1, 4, 4, 2), dtype=np.float32)
    for tag, value in [("nan", NAN), ("inf", INF), ("huge", 1e30)]:
        g = grid.copy()
        g[0, 0, 0, :] = value
        for mode in ("bilinear", "nearest", "bicubic"):
            for pad in ("zeros", "border", "reflection"):
                add(f"gridsample_{mode}_{pad}_{tag}", "GridSample", [("x", x), ("g", g)], {"mode": mode, "padding_mode": pad})
    boxes, scores = rng.random((1, 3, 4), dtype=np.float32), rng.random((1, 1, 3), dtype=np.float32)
    for tag, value in [("nan", NAN), ("inf", INF)]:
        b, s = boxes.copy(), scores.copy()
        b[0, 0, :], s[0, 0, 1] = value, value
        add(f"nms_{tag}", "NonMaxSuppression", [("b", b), ("s", s), ("m", i64(10)), ("iou", f32(0.5)), ("t", f32(value))])
    add("nms_huge_max", "NonMaxSuppression", [("b", boxes), ("s", scores), ("m", i64(1 << 62)), ("iou", f32(0.5)), ("t", f32(0))])
    for tag, k in [("huge", i64(1 << 40)), ("neg", i64(-1)), ("past", i64(6))]:
        add(f"topk_{tag}", "TopK", [("x", v), ("k", k)], outputs=2)
    vn = v.copy()
    vn[0, 1] = NAN
    add("topk_nan", "TopK", [("x", vn), ("k", i64(3))], outputs=2)
    add("argmax_nan", "ArgMax", [("x", vn)], {"axis": 1})
    for tag, shape in [("huge", i64(1 << 31, 1 << 31)), ("neg", i64(-1, 4)), ("overflow", i64(1 << 62, 1 << 62))]:
        add(f"constantofshape_{tag}", "ConstantOfShape", [("s", shape)])
        add(f"expand_{tag}", "Expand", [("x", f32(1)), ("s", shape)])
        add(f"tile_{tag}", "Tile", [("x", v), ("r", shape)])
        add(f"reshape_{tag}", "Reshape", [("x", v), ("s", shape)])
    for tag, pads in [("huge", i64(0, 0, 1 << 40, 0)), ("crop", i64(0, -100, 0, 0)), ("overflow", i64(0, 1 << 62, 0, 1 << 62))]:
        add(f"pad_{tag}", "Pad", [("x", v), ("p", pads)])
    for tag, depth in [("nan", f32(NAN)), ("huge", f32(1e12)), ("neg", f32(-3)), ("zero", f32(0))]:
        add(f"onehot_{tag}", "OneHot", [("i", i64(0, 1, 2)), ("d", depth), ("v", f32(0, 1))])
    for tag, index in [("past", 7), ("before", -9), ("huge", 1 << 62)]:
        column = np.full((2, 1), index, np.int64)
        add(f"gather_{tag}", "Gather", [("x", v), ("i", i64(index))], {"axis": 1})
        add(f"gatherelements_{tag}", "GatherElements", [("x", v), ("i", column)], {"axis": 1})
        add(f"scatterelements_{tag}", "ScatterElements", [("x", v), ("i", column), ("u", np.ones((2, 1), np.float32))], {"axis": 1})
        add(f"scatternd_{tag}", "ScatterND", [("x", v), ("i", np.array([[0, index]], np.int64)), ("u", f32(1))])
        add(f"gathernd_{tag}", "GatherND", [("x", v), ("i", np.array([[0, index]], np.int64))])
    for tag, (start, end, step) in {"step0": (0, 5, 0), "huge": (1 << 62, -(1 << 62), -1), "hugestep": (0, 5, 1 << 62),
                                    "minstep": (5, 0, -(1 << 63))}.items():
        add(f"slice_{tag}", "Slice", [("x", v), ("st", i64(start)), ("en", i64(end)), ("ax", i64(1)), ("sp", i64(step))])
    add("split_short", "Split", [("x", v), ("s", i64(2, 2))], {"axis": 1}, outputs=2)
    add("split_neg", "Split", [("x", v), ("s", i64(7, -2))], {"axis": 1}, outputs=2)
    add("cumsum_axis", "CumSum", [("x", v), ("a", np.int64(5))], expect="axis 5 is out of range for rank 2")
    add("hardmax_axis", "Hardmax", [("x", v)], {"axis": -9}, expect="axis -9 is out of range for rank 2")
    add("trilu_huge", "Trilu", [("x", v), ("k", np.int64(1 << 62))])
    add("eyelike_huge", "EyeLike", [("x", np.zeros((3, 4), np.float32))], {"k": 1 << 40})
    add("mod_zero", "Mod", [("a", i64(5, 3)), ("b", i64(0, 0))])
    add("div_zero", "Div", [("a", i64(5, 3)), ("b", i64(0, 0))])
    add("div_min", "Div", [("a", i64(-(1 << 63))), ("b", i64(-1))])
    add("cast_int64", "Cast", [("a", f32(NAN, INF, -INF, 1e30))], {"to": TensorProto.INT64})
    add("cast_int8", "Cast", [("a", f32(NAN, INF, -INF, 1e30))], {"to": TensorProto.INT8})
    add("quantize_nonfinite", "QuantizeLinear", [("a", f32(NAN, INF, -INF, 1e30)), ("s", f32(0.1)), ("z", np.uint8(0))])
    add("quantize_scale0", "QuantizeLinear", [("a", f32(1, 2)), ("s", f32(0)), ("z", np.uint8(0))])
    add("maxpool_window", "MaxPool", [("x", x)], {"kernel_shape": [100, 100]})
    add("conv_dilation", "Conv", [("x", x), ("w", np.ones((2, 2, 3, 3), np.float32))], {"dilations": [1 << 30, 1 << 30]})
    seq = rng.random((4, 2, 3), dtype=np.float32)
    for tag, lens in [("huge", i64(1 << 40, 2)), ("neg", i64(-1, 2))]:
        add(f"reversesequence_{tag}", "ReverseSequence", [("x", seq), ("l", lens)], {"batch_axis": 1, "time_axis": 0})
    pooled = rng.random((1, 1, 2, 2), dtype=np.float32)
    for tag, index in [("past", 99), ("neg", -5)]:
        add(f"maxunpool_{tag}", "MaxUnpool", [("x", pooled), ("i", np.array([[[[0, index], [5, 10]]]], np.int64))],
            {"kernel_shape": [2, 2], "strides": [2, 2]})
    add("compress_long", "Compress", [("x", seq), ("c", np.ones(9, bool))], {"axis": 1})
    signal = rng.random((1, 16, 1), dtype=np.float32)
    for tag, (length, step) in {"step0": (4, 0), "huge": (1 << 40, 1), "neg": (-4, 2)}.items():
        add(f"stft_{tag}", "STFT", [("s", signal), ("st", np.int64(step)), ("w", None), ("fl", np.int64(length))])
    for tag, n in [("huge", 1 << 40), ("neg", -3)]:
        add(f"hannwindow_{tag}", "HannWindow", [("n", np.int64(n))])
        add(f"dft_{tag}", "DFT", [("x", signal[:, :8]), ("n", np.int64(n))])
    add("melweightmatrix_huge", "MelWeightMatrix", [("n", np.int64(1 << 20)), ("d", np.int64(1 << 20)), ("r", np.int64(16000)),
                                                    ("lo", np.float32(0)), ("hi", np.float32(8000))])
    # Generative models' contrib ops, on a cache of 3 tokens, 2 heads of 4 sharing one KV head.
    hidden = rng.random((1, 2, 8), dtype=np.float32)
    cos, sin = rng.random((8, 2), dtype=np.float32), rng.random((8, 2), dtype=np.float32)
    for tag, pos in [("past", np.array([[0, 9]], np.int64)), ("neg", np.array([[0, -3]], np.int64)), ("huge", i64(1 << 40))]:
        add(f"rotary_{tag}", "RotaryEmbedding", [("x", hidden), ("p", pos), ("cos", cos), ("sin", sin)], {"num_heads": 2},
            domain="com.microsoft", expect="outside the cos/sin caches")
    kv = rng.random((1, 2, 4), dtype=np.float32)
    cache = rng.random((1, 1, 3, 4), dtype=np.float32)
    for tag, (lens, total) in {"lens_huge": (1 << 30, 5), "lens_neg": (-5, 5), "lens_past_total": (8, 5), "total_short": (4, 1),
                               "total_neg": (4, -4)}.items():
        add(f"groupqueryattention_{tag}", "GroupQueryAttention",
            [("q", hidden), ("k", kv), ("v", kv), ("pk", cache), ("pv", cache), ("l", np.array([lens], np.int32)),
             ("t", np.int32(total))], {"num_heads": 2, "kv_num_heads": 1}, outputs=3, domain="com.microsoft")
    return out


def run_case(mminfer, work, name, op, inputs, attrs, outputs, opset, domain, expect):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    given = [(n, np.asarray(a)) for n, a in inputs if a is not None]
    node = helper.make_node(op, [n if a is not None else "" for n, a in inputs], [f"y{i}" for i in range(outputs)],
                            domain=domain, **attrs)
    graph = helper.make_graph(
        [node], name, [helper.make_tensor_value_info(n, numpy_helper.from_array(a).data_type, list(a.shape)) for n, a in given],
        [helper.make_tensor_value_info(f"y{i}", TensorProto.UNDEFINED, None) for i in range(outputs)])
    path = os.path.join(d, "model.onnx")
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    onnx.save(helper.make_model(graph, opset_imports=opsets), path)
    cmd = [mminfer, "run", path, "--output-dir", os.path.join(d, "out")]
    for n, a in given:
        f = os.path.join(d, n + ".npy")
        np.save(f, a)
        cmd += ["--input", f"{n}={f}"]
    try:
        r = subprocess.run(["bash", "-c", 'ulimit -v 8000000; exec "$@"', "limit"] + cmd, capture_output=True, text=True,
                           timeout=30)
    except subprocess.TimeoutExpired:
        return "did not end within 30 s"
    lines = r.stderr.strip().splitlines()
    if r.returncode == 0 and expect is None:
        return None
    if r.returncode == 1 and len(lines) == 1 and f"({op})" in lines[0] and (expect is None or expect in lines[0]):
        return None
    return f"exit {r.returncode}: {r.stderr.strip()[-300:]!r}"


def main():
    mminfer, work = sys.argv[1], sys.argv[2]
    failures = []
    all_cases = cases()
    for c in all_cases:
        problem = run_case(mminfer, work, *c)
        print(f"{'FAIL' if problem else 'ok  '} {c[0]}{': ' + problem if problem else ''}")
        if problem:
            failures.append(c[0])
    print(f"{len(all_cases) - len(failures)} of {len(all_cases)} hostile inputs ended in a result or a clean error")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
