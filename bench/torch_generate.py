#!/usr/bin/env python3
"""PyTorch eager on a LLaMA-style folder, as the peer a torch user has: the replica of
tools/generative_torch.py with the weights of the folder's model.onnx, greedy decode with its KV
cache (past keys and values concatenated each step). Prints one JSON line:
{"prefill_ms", "decode_ms_median", "context", "threads", "tokens", "torch"}.

    torch_generate.py FOLDER [--prompt-tokens 32 | --prompt ID,ID,...] [--new-tokens 64] [--threads 1]
                      [--repeats 3]

Without --prompt, the prompt is the fixed id sequence tools/ort_generate_bench.js uses."""
import argparse
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import generative_torch as gm  # noqa: E402
import write_gguf  # noqa: E402  (its reader of the exported weights)


def load(folder):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    model = gm.LlamaForCausalLM(cfg).eval()
    weights = write_gguf.onnx_weights(os.path.join(folder, "model.onnx"))
    state = {f"{k}.weight": torch.from_numpy(v.copy()) for k, v in weights.items()}
    if cfg.get("tie_word_embeddings"):
        state.pop("lm_head.weight", None)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if not (cfg.get("tie_word_embeddings") and m == "lm_head.weight")]
    if missing or unexpected:
        sys.exit(f"torch_generate.py: error: weights do not match the replica (missing {missing[:3]}, unexpected {unexpected[:3]})")
    return cfg, model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder")
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--prompt", help="comma-separated token ids")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg, model = load(args.folder)
    n, kv = cfg["num_hidden_layers"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    if args.prompt:
        try:
            prompt = [int(t) for t in args.prompt.split(",")]
        except ValueError:
            sys.exit(f"torch_generate.py: error: --prompt {args.prompt!r} is not a list of token ids")
        if not prompt or min(prompt) < 0 or max(prompt) >= cfg["vocab_size"]:
            sys.exit(f"torch_generate.py: error: --prompt ids must lie in [0, {cfg['vocab_size']})")
    else:
        prompt = [(i * 7919 + 13) % cfg["vocab_size"] for i in range(args.prompt_tokens)]
    p = len(prompt)
    ids = torch.tensor([prompt])
    with torch.no_grad():
        prefill = []
        for r in range(args.repeats + 1):  # the first run warms up
            past = [torch.zeros(1, kv, 0, hd) for _ in range(2 * n)]
            t0 = time.perf_counter()
            logits, *past = model(ids, torch.ones(1, p, dtype=torch.int64), torch.arange(p)[None], *past)
            if r:
                prefill.append((time.perf_counter() - t0) * 1e3)
        tokens = [int(logits[0, -1].argmax())]
        decode = []
        for step in range(1, args.new_tokens):
            total = p + step
            t0 = time.perf_counter()
            logits, *past = model(torch.tensor([[tokens[-1]]]), torch.ones(1, total, dtype=torch.int64),
                                  torch.tensor([[total - 1]]), *past)
            tokens.append(int(logits[0, -1].argmax()))
            decode.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"torch": torch.__version__.split("+")[0], "context": p, "threads": args.threads, "prefill_ms": statistics.median(prefill),
                      "decode_ms_median": statistics.median(decode) if decode else None, "tokens": tokens}))


if __name__ == "__main__":
    main()
