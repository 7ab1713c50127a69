#!/usr/bin/python3
"""Exports the reference models of tools/reference_models.py to ONNX with torch's outputs beside them.

  make_reference_models.py [OUT] [--only NAME ...] [--force]

OUT defaults to tests/data/generated. For every model and opset (14: LayerNormalization
decomposed into ReduceMean/Sub/Pow/Sqrt/Div; 17: one LayerNormalization op) it writes

  OUT/<model>_opset<N>/model.onnx
  OUT/<model>_opset<N>/manifest.json            {"cases": [...], "inputs": [...], "outputs": [...]}
  OUT/<model>_opset<N>/<case>/inputs/<graph input name>.npy
  OUT/<model>_opset<N>/<case>/outputs/<graph output name>.npy   (torch's result, float32)

The first case of each model is the one it was exported with (batch 3, 13 tokens, 37-pixel-wide
images, 101 audio frames); later cases use other batch and sequence sizes through the dynamic axes.
OUT/.stamp holds a hash of the generator sources and torch's version: when it matches, nothing is
regenerated.
"""
import argparse
import json
import os
import sys

import generator_stamp  # tools/, the folder of this script

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = [os.path.join(HERE, "make_reference_models.py"), os.path.join(HERE, "reference_models.py")]
OPSETS = (14, 17)


def sources_hash():
    return generator_stamp.sources_hash(SOURCES)


def up_to_date(out, names, digest):
    stamp = os.path.join(out, ".stamp")
    if not os.path.isfile(stamp) or open(stamp).read().strip() != digest:
        return False
    return all(os.path.isfile(os.path.join(out, f"{n}_opset{o}", "manifest.json")) for n in names for o in OPSETS)


def export_one(name, builder, seed, opset, out):
    import numpy as np
    import onnx
    import torch

    model, cases, spec = builder(seed)
    folder = os.path.join(out, f"{name}_opset{opset}")
    os.makedirs(folder, exist_ok=True)
    example = cases[0][1]
    input_names = list(example)
    path = os.path.join(folder, "model.onnx")
    with torch.no_grad():
        torch.onnx.export(model, tuple(example.values()), path, input_names=input_names,
                          output_names=spec["outputs"], dynamic_axes=spec["dynamic_axes"],
                          opset_version=opset, do_constant_folding=True)
    proto = onnx.load(path)
    onnx.checker.check_model(proto)
    graph_inputs = [i.name for i in proto.graph.input]
    graph_outputs = [o.name for o in proto.graph.output]
    if graph_outputs != spec["outputs"]:
        raise SystemExit(f"{name}: exported outputs {graph_outputs}, expected {spec['outputs']}")
    ops = sorted({n.op_type for n in proto.graph.node})

    for case, inputs in cases:
        with torch.no_grad():
            result = model(*inputs.values())
        result = result if isinstance(result, tuple) else (result,)
        for sub, arrays in (("inputs", {k: v for k, v in inputs.items() if k in graph_inputs}),
                            ("outputs", dict(zip(graph_outputs, result)))):
            os.makedirs(os.path.join(folder, case, sub), exist_ok=True)
            for k, v in arrays.items():
                np.save(os.path.join(folder, case, sub, k + ".npy"), v.numpy())
    manifest = {"model": name, "opset": opset, "seed": seed, "cases": [c for c, _ in cases],
                "inputs": graph_inputs, "outputs": graph_outputs, "ops": ops}
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"{name} opset {opset}: {len(proto.graph.node)} nodes, ops {' '.join(ops)}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", nargs="?", default=os.path.join(HERE, "..", "tests", "data", "generated"))
    p.add_argument("--only", nargs="*", help="model names (default: all)")
    p.add_argument("--force", action="store_true", help="regenerate even when the stamp matches")
    args = p.parse_args()

    sys.path.insert(0, HERE)
    digest = sources_hash()
    # Decide before importing torch: the import alone costs seconds.
    all_names = ["clip_vision", "clip_text", "bert", "whisper_encoder"]
    names = args.only or all_names
    if not args.force and not args.only and up_to_date(args.out, names, digest):
        print(f"reference models in {args.out} are up to date")
        return 0

    import warnings

    import torch
    from reference_models import MODELS

    # The exporter warns that advanced indexing breaks on negative indices; ours (ArgMax) are not.
    warnings.filterwarnings("ignore", message=".*advanced indexing.*", category=UserWarning)

    torch.set_num_threads(1)  # deterministic reductions in the reference outputs
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise SystemExit(f"unknown model(s) {unknown}; known: {sorted(MODELS)}")
    os.makedirs(args.out, exist_ok=True)
    stamp = os.path.join(args.out, ".stamp")
    if os.path.exists(stamp):
        os.remove(stamp)
    for name in names:
        builder, seed = MODELS[name]
        for opset in OPSETS:
            export_one(name, builder, seed, opset, args.out)
    if not args.only:
        with open(stamp, "w") as f:
            f.write(digest + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
