#!/usr/bin/env python3
"""Times the plain present->past decode loop (InferenceSession.run per token, each step's
present.* fed back as past_key_values.*) on a decoder-only folder of make_generative_models.py or
export_contrib_llama.py, in mminfer's Python module and in ONNX Runtime (tools/ort_naive_decode.js):

    bench_naive_decode.py FOLDER [--engine mminfer|ort]... [--prompt 16] [--steps 64] [--threads 1]

Prints per engine the prefill time (after one untimed prefill) and the median decode time per token. Figures only: the
loop is the one ONNX Runtime users run, not mminfer's own KV cache."""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def mminfer_loop(model, info, vocab, prompt, steps, threads):
    try:
        import mminfer
    except ImportError:
        sys.exit("bench_naive_decode.py: error: cannot import mminfer (set PYTHONPATH=build/python)")
    s = mminfer.InferenceSession(model, threads=threads)
    names = [o.name for o in s.get_outputs()]
    wants_positions = any(i.name == "position_ids" for i in s.get_inputs())
    past = {f"past_key_values.{i}.{kind}": np.zeros((1, info["kv_heads"], 0, info["head_dim"]), np.float32)
            for i in range(info["num_layers"]) for kind in ("key", "value")}
    ids = (np.arange(prompt, dtype=np.int64) * 7919 % vocab)[None, :]
    total, times = prompt, []
    s.run(None, dict(input_ids=ids, attention_mask=np.ones((1, total), np.int64), **past,
                     **({"position_ids": np.arange(total, dtype=np.int64)[None, :]} if wants_positions else {})))  # warm-up
    for step in range(steps + 1):
        feed = dict(input_ids=ids, attention_mask=np.ones((1, total), np.int64), **past)
        if wants_positions:
            feed["position_ids"] = np.arange(total - ids.shape[1], total, dtype=np.int64)[None, :]
        t0 = time.perf_counter()
        out = dict(zip(names, s.run(None, feed)))
        times.append((time.perf_counter() - t0) * 1e3)
        ids = out["logits"][:, -1].argmax(-1).astype(np.int64)[:, None]
        total += 1
        past = {k: out[k.replace("past_key_values", "present")] for k in past}
    return {"prefill_ms": round(times[0], 3), "decode_ms_per_token": round(float(np.median(times[1:])), 3), "steps": steps}


def ort_loop(model, info, vocab, prompt, steps, threads):
    cmd = [os.environ.get("MMINFER_NODE", "node"), os.path.join(HERE, "ort_naive_decode.js"), model,
           "--kv-heads", str(info["kv_heads"]), "--head-dim", str(info["head_dim"]), "--layers", str(info["num_layers"]),
           "--prompt", str(prompt), "--steps", str(steps), "--threads", str(threads), "--vocab", str(vocab)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(res.stderr.strip() or f"ort_naive_decode.js exited with {res.returncode}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder")
    ap.add_argument("--engine", action="append", choices=["mminfer", "ort"])
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    ref = os.path.join(args.folder, "reference", "reference.json")
    if not os.path.isfile(ref):
        sys.exit(f"bench_naive_decode.py: error: {ref} is missing (not a folder of make_generative_models.py)")
    with open(ref) as f:
        info = json.load(f)
    if not info.get("kind", "").startswith("decoder-only"):
        sys.exit(f"bench_naive_decode.py: error: {args.folder} is not a decoder-only folder")
    with open(os.path.join(args.folder, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    model = os.path.join(args.folder, "model.onnx")
    for engine in args.engine or ["ort", "mminfer"]:
        r = (ort_loop if engine == "ort" else mminfer_loop)(model, info, vocab, args.prompt, args.steps, args.threads)
        print(f"{engine} {info['model']}: prefill {args.prompt} tokens {r['prefill_ms']:.2f} ms, "
              f"decode {r['decode_ms_per_token']:.2f} ms/token (median of {r['steps']}, {args.threads} thread(s))")


if __name__ == "__main__":
    main()
