#!/usr/bin/python3
"""`mminfer optimize` end to end on a model: writes its INT8 form twice (the default policy,
then with a --min-cosine bound above what full INT8 reaches), and checks that
  - both files load and run in ONNX Runtime (tools/ort_run.js) and in mminfer, every output
    within --min-cosine-any (default 0.999) of FP32 on the same inputs;
  - each file has one MatMulInteger (with --calib-method: one MatMul or Conv reading a
    DequantizeLinear) per layer its report calls INT8, and the report's own
    figures agree with a recomputation from ONNX Runtime's answers within the INT8 noise;
  - the bound made layers fall back and holds on the evaluation inputs;
  - bad options fail with one line.

  check_optimize.py --mminfer BIN (--model M.onnx | --make clip_vision|clip_text) --work DIR --shape NAME=AxB
                    [--node node] [--calib-method minmax|percentile|entropy] [--quantize fp16]

--calib-method writes the static QDQ form, calibrated on a few random samples of the
evaluation shape (batch 1) made in DIR/calib. --quantize fp16 writes FP16 weights instead (one
MatMul reading a Cast of a FLOAT16 initializer per FP16 layer).

--make exports check_precision_accuracy.py's reduced CLIP tower into DIR (unless it is there).
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from output_compare import load_output, run_tool, verdict  # noqa: E402

import numpy as np  # noqa: E402


def cosines(a, b):
    a = a.reshape(a.shape[0], -1).astype(np.float64)
    b = b.reshape(b.shape[0], -1).astype(np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def outputs_of(runner, model, inputs, out_dir, names, args):
    if runner == "ort":
        cmd = [args.node, os.path.join(HERE, "ort_run.js"), model, "--output-dir", out_dir, "--threads", "2"]
    else:
        cmd = [args.mminfer, "run", model, "--output-dir", out_dir, "--threads", "2"]
    for name, path in inputs.items():
        cmd += ["--input", f"{name}={path}"]
    run_tool(cmd, f"{runner} on {os.path.basename(model)}")
    return {n: load_output(out_dir, n) for n in names}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mminfer", required=True)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model")
    src.add_argument("--make", choices=["clip_vision", "clip_text"])
    p.add_argument("--work", required=True)
    p.add_argument("--shape", required=True, help="NAME=AxB..., the evaluation batch")
    p.add_argument("--node", default="node")
    p.add_argument("--min-cosine-any", type=float, default=0.999)
    p.add_argument("--calib-method", choices=["minmax", "percentile", "entropy"])
    p.add_argument("--quantize", choices=["int8", "fp16"], default="int8")
    args = p.parse_args()
    import onnx

    os.makedirs(args.work, exist_ok=True)
    if args.make:
        from check_precision_accuracy import ensure_model
        args.model = ensure_model(args.make, args.work)
    name, dims = args.shape.split("=")
    shape = [int(d) for d in dims.split("x")]
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    inputs = {name: os.path.join(args.work, "input.npy")}
    np.save(inputs[name], x)
    outputs = [o.name for o in onnx.load(args.model, load_external_data=False).graph.output]
    fp32 = outputs_of("mminfer", args.model, inputs, os.path.join(args.work, "fp32"), outputs, args)

    form = []
    if args.calib_method:
        calib = os.path.join(args.work, "calib")
        os.makedirs(calib, exist_ok=True)
        rng = np.random.default_rng(11)
        for i in range(6):
            np.save(os.path.join(calib, f"sample{i}.npy"), rng.standard_normal([1] + shape[1:]).astype(np.float32))
        form = ["--calib", calib, "--calib-method", args.calib_method]
    if args.quantize == "fp16":
        form += ["--quantize", "fp16"]
    layers_key = "fp16_layers" if args.quantize == "fp16" else "int8_layers"

    def int8_nodes(graph):
        if args.quantize == "fp16":
            halves = {t.name for t in graph.initializer if t.data_type == 10}  # FLOAT16
            cast = {n.output[0] for n in graph.node if n.op_type == "Cast" and n.input[0] in halves}
            return sum(1 for n in graph.node if n.op_type == "MatMul" and n.input[1] in cast)
        if not args.calib_method:
            return sum(1 for n in graph.node if n.op_type == "MatMulInteger")
        dq = {o for n in graph.node if n.op_type == "DequantizeLinear" for o in n.output}
        return sum(1 for n in graph.node if n.op_type in ("MatMul", "Conv") and n.input[0] in dq and n.input[1] in dq)

    failures = []
    reports = {}
    for label, extra in (("default", []), ("bounded", None)):
        out = os.path.join(args.work, f"{label}.onnx")
        report = os.path.join(args.work, f"{label}.json")
        if extra is None:  # a bound above what the default choice reached: some layers must fall back
            bound = 1 - (1 - reports["default"]["min_cosine"]) / 3
            extra = ["--min-cosine", f"{bound:.9f}"]
        run_tool([args.mminfer, "optimize", args.model, "-o", out, "--input", f"{name}={inputs[name]}",
                  "--report", report, "--threads", "2"] + form + extra, f"mminfer optimize ({label})")
        r = json.load(open(report))
        reports[label] = r
        graph = onnx.load(out).graph
        n_int = int8_nodes(graph)
        if n_int != len(r[layers_key]) or (n_int == 0 and label == "default"):
            failures.append(f"{label}: {n_int} quantized nodes for {len(r[layers_key])} {layers_key}")
        for runner in ("ort", "mminfer"):
            got = outputs_of(runner, out, inputs, os.path.join(args.work, f"{label}_{runner}"), outputs, args)
            for o in outputs:
                c = cosines(got[o], fp32[o])
                print(f"{label} file, {runner}: {o} cosine to FP32 min {c.min():.7f}")
                if not (c.min() >= args.min_cosine_any):
                    failures.append(f"{label} file on {runner}: {o} cosine {c.min():.7f} < {args.min_cosine_any}")
                if runner == "ort":  # the report measured the file; ONNX Runtime runs the same file
                    reported = next(x for x in r["outputs"] if x["name"] == o)["min_cosine"]
                    if abs((1 - reported) - (1 - c.min())) > max(3 * (1 - c.min()), 1e-5):
                        failures.append(f"{label}: report says {o} cosine {reported}, ONNX Runtime gives {c.min():.7f}")
        print(f"{label}: {len(r[layers_key])} {layers_key}, {len(r['fp32_fallback'])} fell back, "
              f"report min cosine {r['min_cosine']:.7f}")
    b = reports["bounded"]
    bound = 1 - (1 - reports["default"]["min_cosine"]) / 3
    if not b["fp32_fallback"] or not b["sensitivity"]:
        failures.append("the bound above the default's cosine made no layer fall back")
    if not (b["min_cosine"] >= bound or not b[layers_key]):
        failures.append(f"bounded report min cosine {b['min_cosine']} below the bound {bound}")

    for bad, says in ((["--quantize", "int3"], "unknown value 'int3'"), (["--min-cosine", "two"], "expects a number"),
                      (["--precision", "text=int4"], "unknown precision"),
                      (["--calib", os.path.join(args.work, "no-such-folder")], "not a folder"),
                      (["--calib", args.work, "--calib-method", "median"], "unknown value 'median'")):
        res = subprocess.run([args.mminfer, "optimize", args.model, "-o", os.path.join(args.work, "bad.onnx")] + bad,
                             capture_output=True, text=True)
        lines = res.stderr.strip().splitlines()
        if res.returncode == 0 or len(lines) != 1 or says not in lines[0]:
            failures.append(f"{bad}: expected one line saying '{says}', got rc {res.returncode}: {res.stderr.strip()!r}")

    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
