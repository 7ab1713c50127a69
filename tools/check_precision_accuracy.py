#!/usr/bin/python3
"""A lower precision (dynamic INT8 or BF16) against FP32, both through `mminfer run`: cosine
similarity of the embeddings, input by input, over an evaluation set of random and structured
inputs.

  check_precision_accuracy.py --mminfer BIN --work DIR (--make clip_vision|clip_text | --model PATH --kind vision|text)
                              [--precision int8|bf16|SPEC] [--batch 8] [--min-cosine 0.999] [--threads N]
                              [--embeds NAME] [-- MMINFER FLAGS...]

--make exports a CLIP-shaped tower at reduced size (tools/reference_models.py: ViT 96x96 patch 16,
width 256, 6 layers; text 32 tokens, width 256, 6 layers; torch's default random init, fixed seed)
into DIR, unless DIR already holds it. --model uses an existing tower instead (e.g. models/clip-b32).
The low-precision run gets `--precision P` (default int8) plus any flags after `--`. Prints every cosine and the
minimum; exits 1 when any embedding falls below --min-cosine. --ort-int8 PATH also runs ONNX
Runtime (tools/ort_run.js) on the model and on its MatMulInteger form (quantize_ort_dynamic.py)
and reports that pair's cosines, for comparison only.
"""
import argparse
import hashlib
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from output_compare import load_output, run_tool  # noqa: E402

import numpy as np  # noqa: E402

CLIP_MEAN = np.array([0.48145466, 0.4578275, 0.40821073], np.float32)
CLIP_STD = np.array([0.26862954, 0.26130258, 0.27577711], np.float32)


def stamp():
    h = hashlib.sha256()
    for f in (__file__, os.path.join(HERE, "reference_models.py")):
        with open(f, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()


def make_model(kind, path):
    """Exports the reduced CLIP tower `kind` to path (opset 17, dynamic batch)."""
    import warnings

    import torch
    from reference_models import ClipText, ClipVision

    warnings.filterwarnings("ignore", category=UserWarning)
    torch.manual_seed(96 if kind == "clip_vision" else 32)
    batch = {0: "batch"}
    with torch.no_grad():
        if kind == "clip_vision":
            model = ClipVision(image_hw=(96, 96), patch=16, width=256, heads=4, layers=6, proj=128).eval()
            torch.onnx.export(model, (torch.randn(1, 3, 96, 96),), path, input_names=["pixel_values"],
                              output_names=["last_hidden_state", "image_embeds"], opset_version=17,
                              dynamic_axes={"pixel_values": batch, "last_hidden_state": batch, "image_embeds": batch})
        else:
            model = ClipText(vocab=1000, max_len=32, width=256, heads=4, layers=6, proj=128).eval()
            ids = torch.randint(1, 998, (1, 32))
            ids[0, 9] = 999
            mask = torch.ones(1, 32, dtype=torch.long)
            torch.onnx.export(model, (ids, mask), path, input_names=["input_ids", "attention_mask"],
                              output_names=["last_hidden_state", "text_embeds"], opset_version=17,
                              dynamic_axes={"input_ids": batch, "attention_mask": batch, "last_hidden_state": batch,
                                            "text_embeds": batch})


def ensure_model(make, work):
    """The reduced tower `make` in WORK, exported unless an up-to-date copy is there."""
    model = os.path.join(work, make + ".onnx")
    stamp_path = model + ".stamp"
    if not (os.path.isfile(model) and os.path.isfile(stamp_path) and open(stamp_path).read() == stamp()):
        make_model(make, model)
        with open(stamp_path, "w") as f:
            f.write(stamp())
    return model


def image_inputs(batch, hw, rng):
    """Half plain normal noise at a few scales, half smooth picture-like images (gradients, blobs,
    stripes and a flat one) normalised the way CLIP's preprocessing does."""
    h, w = hw
    images = []
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32) / max(h, w)
    for i in range(batch):
        if i % 2 == 0:
            images.append(rng.standard_normal((3, h, w)).astype(np.float32) * (0.5 + i / 4))
            continue
        kind = (i // 2) % 4
        if kind == 0:  # colour gradient
            rgb = np.stack([xx, yy, 1 - xx * yy])
        elif kind == 1:  # soft blobs
            rgb = np.zeros((3, h, w), np.float32)
            for _ in range(5):
                cy, cx, r = rng.uniform(0, 1), rng.uniform(0, 1), rng.uniform(0.05, 0.3)
                blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r * r))
                rgb += blob[None] * rng.uniform(0, 1, (3, 1, 1))
            rgb = np.clip(rgb, 0, 1)
        elif kind == 2:  # stripes with noise
            rgb = 0.5 + 0.5 * np.sin(xx * rng.uniform(10, 60))[None].repeat(3, 0)
            rgb = np.clip(rgb + 0.05 * rng.standard_normal((3, h, w)), 0, 1)
        else:  # nearly flat grey
            rgb = np.full((3, h, w), 0.5, np.float32) + 0.01 * rng.standard_normal((3, h, w))
        images.append(((rgb.astype(np.float32) - CLIP_MEAN[:, None, None]) / CLIP_STD[:, None, None]).astype(np.float32))
    return {"pixel_values": np.stack(images).astype(np.float32)}


def text_inputs(batch, tokens, vocab, rng):
    """Token ids with a start token, an end-of-text token (the largest id) at varied lengths and
    padding after it; the mask covers the real tokens."""
    ids = rng.integers(1, vocab - 2, (batch, tokens)).astype(np.int64)
    mask = np.zeros((batch, tokens), np.int64)
    for i in range(batch):
        n = 2 + (i * (tokens - 2)) // max(batch - 1, 1)
        n = min(max(n, 2), tokens)
        ids[i, 0] = vocab - 2
        ids[i, n - 1] = vocab - 1
        ids[i, n:] = 0
        mask[i, :n] = 1
    return {"input_ids": ids, "attention_mask": mask}


def cosines(a, b):
    a, b = a.reshape(a.shape[0], -1).astype(np.float64), b.reshape(b.shape[0], -1).astype(np.float64)
    return (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-300)


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mminfer", required=True)
    p.add_argument("--work", required=True)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--make", choices=["clip_vision", "clip_text"])
    src.add_argument("--model")
    p.add_argument("--kind", choices=["vision", "text"])
    p.add_argument("--precision", default="int8", help="mminfer --precision value for the run compared with FP32")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--min-cosine", type=float, default=0.999)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--embeds", help="output to compare (default image_embeds / text_embeds)")
    p.add_argument("--ort-int8", help="ONNX Runtime's INT8 form of the model, to report its cosines too")
    p.add_argument("--node", default="node")
    args = p.parse_args(argv)

    os.makedirs(args.work, exist_ok=True)
    if args.make:
        kind = "vision" if args.make == "clip_vision" else "text"
        model = ensure_model(args.make, args.work)
    else:
        if not args.kind:
            p.error("--model needs --kind vision|text")
        model, kind = args.model, args.kind

    import onnx

    graph = onnx.load(model, load_external_data=False).graph
    rng = np.random.default_rng(2024)
    if kind == "vision":
        dims = [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim]
        inputs = image_inputs(args.batch, (dims[2], dims[3]), rng)
    else:
        tokens = next(d.dim_value for d in graph.input[0].type.tensor_type.shape.dim[1:2]) or 77
        vocab = next(int(t.dims[0]) for t in graph.initializer if len(t.dims) == 2 and "token" in t.name) \
            if any("token" in t.name for t in graph.initializer) else 49408
        inputs = text_inputs(args.batch, tokens, vocab, rng)
    embeds = args.embeds or ("image_embeds" if kind == "vision" else "text_embeds")

    with tempfile.TemporaryDirectory(prefix="mminfer-precision-") as tmp:
        paths = {}
        for name, value in inputs.items():
            paths[name] = os.path.join(tmp, name + ".npy")
            np.save(paths[name], value)
        outs = {}
        for label, flags in (("fp32", []), ("low", ["--precision", args.precision] + extra)):
            out_dir = os.path.join(tmp, label)
            cmd = [args.mminfer, "run", model, "--output-dir", out_dir, "--threads", str(args.threads)] + flags
            for name, path in paths.items():
                cmd += ["--input", f"{name}={path}"]
            run_tool(cmd, f"mminfer run ({label})")
            outs[label] = {n: load_output(out_dir, n) for n in (embeds, "last_hidden_state")}
        if args.ort_int8:
            for label, path in (("ort_fp32", model), ("ort_int8", args.ort_int8)):
                out_dir = os.path.join(tmp, label)
                cmd = [args.node, os.path.join(HERE, "ort_run.js"), path, "--output-dir", out_dir, "--threads", str(args.threads)]
                for name, p_ in paths.items():
                    cmd += ["--input", f"{name}={p_}"]
                run_tool(cmd, f"ort_run.js ({label})")
                outs[label] = {embeds: load_output(out_dir, embeds)}

    cos = cosines(outs["low"][embeds], outs["fp32"][embeds])
    hidden = cosines(outs["low"]["last_hidden_state"], outs["fp32"]["last_hidden_state"])
    name = args.make or model
    print(f"{name}: {args.precision} vs FP32 cosine of {embeds}, {len(cos)} inputs "
          f"(flags: --precision {args.precision} {' '.join(extra)}):")
    print("  " + " ".join(f"{c:.6f}" for c in cos))
    print(f"  min {cos.min():.6f}, mean {cos.mean():.6f}; last_hidden_state min {hidden.min():.6f}")
    if args.ort_int8:
        ort = cosines(outs["ort_int8"][embeds], outs["ort_fp32"][embeds])
        agree = cosines(outs["ort_fp32"][embeds], outs["fp32"][embeds])
        print(f"  ONNX Runtime INT8 (MatMulInteger form) vs its FP32: " + " ".join(f"{c:.6f}" for c in ort))
        print(f"  min {ort.min():.6f}, mean {ort.mean():.6f}; mminfer FP32 vs ONNX Runtime FP32 min {agree.min():.7f}")
    bad = np.flatnonzero(~(cos >= args.min_cosine))
    if bad.size:
        print(f"FAIL: inputs {bad.tolist()} below {args.min_cosine}")
        return 1
    print(f"PASS: every input >= {args.min_cosine}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
