#!/usr/bin/env python3
"""Checks that llama.cpp (node-llama-cpp, tools/llamacpp_generate.js) runs the GGUF files
tools/write_gguf.py writes as torch runs the folder: on the F32 file, the greedy tokens of every
prompt in reference/ equal torch's for all new tokens; on the Q8_0 file, the first --q8-prefix
tokens do (8-bit weights, and llama.cpp's 8-bit activations in its Q8_0 dot products, move the
logits enough that a random-weight model's greedy path leaves torch's after a few tokens, so
only the start is asserted; the full agreement length is printed). The Q8_0 and Q4_0 encoders
are also checked on their own: decoding the blocks gives back every value within half a step.

    check_llamacpp.py FOLDER WORK_DIR [--q8-prefix 8] [--no-rope-permute]

Exits 77 (ctest's skip) when node-llama-cpp is not installed (scripts/bootstrap installs it)."""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import write_gguf  # noqa: E402


def dequantize(data, kind, n):
    if kind == "q8_0":
        b = np.frombuffer(data, dtype=[("d", "<f2"), ("qs", "i1", 32)])
        return (b["d"].astype(np.float32)[:, None] * b["qs"]).reshape(n), b["d"].astype(np.float32)
    b = np.frombuffer(data, dtype=[("d", "<f2"), ("qs", "u1", 16)])
    codes = np.concatenate((b["qs"] & 15, b["qs"] >> 4), axis=1).astype(np.float32) - 8
    return (b["d"].astype(np.float32)[:, None] * codes).reshape(n), b["d"].astype(np.float32)


def check_encoders():
    """Each value decodes within half a quantization step (plus the fp16 rounding of the scale;
    Q4_0: a whole step for values past +7.5 steps, which code 15 clips), and a block's largest
    magnitude is what the end of the code range decodes to."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((8, 96)).astype(np.float32) * rng.uniform(0.01, 10, (8, 1)).astype(np.float32)
    w[0, :32] = 0  # an all-zero block must decode to zeros, not NaN
    for kind, quant, steps, tol in (("q8_0", write_gguf.quantize_q8_0, 127, 0.5), ("q4_0", write_gguf.quantize_q4_0, 8, 1.0)):
        deq, d = dequantize(quant(w), kind, w.size)
        err = np.abs(deq - w.reshape(-1)).reshape(-1, 32).max(axis=1)
        amax = np.abs(w.reshape(-1, 32)).max(axis=1)
        bound = np.abs(d) * tol + amax * 2e-3
        if not np.all(np.isfinite(deq)) or np.any(err > bound):
            sys.exit(f"check_llamacpp.py: {kind} encoder: error {err.max():.4g} beyond {tol} step")
        if not np.allclose(np.abs(d) * steps, amax, rtol=2e-3):
            sys.exit(f"check_llamacpp.py: {kind} encoder: the scale does not map the largest value to the last code")
    print("Q8_0 and Q4_0 encoders: every value within half a step (Q4_0: one at the clipped end)")


def run_llamacpp(gguf, prompts, new_tokens):
    """llama.cpp's new tokens for each prompt, one process for all (the model loads once)."""
    cmd = [os.environ.get("MMINFER_NODE", "node"), os.path.join(HERE, "llamacpp_generate.js"), "--model", gguf,
           "--new-tokens", str(new_tokens)]
    for prompt in prompts:
        cmd += ["--prompt", ",".join(map(str, prompt))]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"check_llamacpp.py: llamacpp_generate.js failed: {r.stderr.strip()}")
    return [json.loads(line)["tokens"] for line in r.stdout.strip().splitlines()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder")
    ap.add_argument("work_dir")
    ap.add_argument("--q8-prefix", type=int, default=8)
    ap.add_argument("--no-rope-permute", action="store_true", help="write Q/K in HF order (the check must then fail)")
    args = ap.parse_args()

    check_encoders()
    modules = os.environ.get("MMINFER_NODE_MODULES", os.path.join(HERE, "node_modules"))
    if not os.path.exists(os.path.join(modules, "node-llama-cpp", "package.json")):
        print(f"check_llamacpp.py: node-llama-cpp is not installed in {modules} (run scripts/bootstrap); skipped")
        sys.exit(77)
    with open(os.path.join(args.folder, "reference", "reference.json")) as f:
        ref = json.load(f)
    cases = {}  # each distinct prompt once: llama.cpp runs one unpadded sequence
    for case in ref["cases"]:
        for prompt, tokens in zip(case["prompt_ids"], case["tokens"]):
            cases.setdefault(tuple(prompt), tokens)
    os.makedirs(args.work_dir, exist_ok=True)
    failures = []
    for kind in ("f32", "q8_0"):
        gguf = os.path.join(args.work_dir, f"{os.path.basename(os.path.normpath(args.folder))}-{kind}.gguf")
        cmd = [sys.executable, os.path.join(HERE, "write_gguf.py"), args.folder, gguf, "--type", kind]
        subprocess.run(cmd + (["--no-rope-permute"] if args.no_rope_permute else []), check=True)
        new_tokens = max(len(w) for w in cases.values())
        for (prompt, want), got in zip(cases.items(), run_llamacpp(gguf, list(cases), new_tokens)):
            agree = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), len(want))
            need = len(want) if kind == "f32" else min(args.q8_prefix, len(want))
            ok = agree >= need
            print(f"{kind}: prompt of {len(prompt)} tokens: {agree} of {len(want)} new tokens equal torch's "
                  f"(required {need}) {'ok' if ok else 'MISMATCH'}")
            if not ok:
                failures.append(f"{kind} prompt of {len(prompt)} tokens: token {agree} is {got[agree]}, torch's {want[agree]}")
    if failures:
        sys.exit("check_llamacpp.py: llama.cpp differs from torch: " + "; ".join(failures))
    print("llama.cpp reproduces torch's greedy tokens")


if __name__ == "__main__":
    main()
