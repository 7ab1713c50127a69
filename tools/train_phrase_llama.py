#!/usr/bin/env python3
"""Trains the LLaMA-79M-shaped decoder of tools/make_generative_models.py (d=576, 12 layers, 9 / 3
heads, vocab 32000) on a synthetic language it can learn in minutes, so that its decode is
memory-bound and its next-token distributions mean something (speculative decoding's acceptance,
the decoding cascade's escalations):

    train_phrase_llama.py OUT [--steps 60] [--threads 2]

The language: 50 fixed phrases of 8 token ids (drawn from 100..1099 with a fixed seed), texts
being phrases one after another, chosen at random. Inside a phrase the next token is certain;
at a phrase's start it is one of 50. Training: AdamW 1e-3, batches of 8 texts of 64 tokens,
fixed seeds; 60 steps reach ~87% next-token accuracy (the ceiling is 7/8). OUT gets the folder
make_generative_models.py writes for llama-79m (model.onnx, config.json, tokenizer.json...,
torch's greedy references), plus phrases.json (the phrases, and prompts made of them)."""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_generative_models as mg  # noqa: E402

PHRASES, PHRASE_LENGTH, TEXT = 50, 8, 64


def phrases():
    return np.random.default_rng(20261205).integers(100, 1100, size=(PHRASES, PHRASE_LENGTH))


def texts(rng, table, n, length):
    out = []
    for _ in range(n):
        picks = rng.integers(0, PHRASES, size=length // PHRASE_LENGTH + 2)
        out.append(np.concatenate([table[i] for i in picks])[:length + 1])
    return torch.from_numpy(np.stack(out))


def trainer(steps, threads):
    def train(model, cfg):
        torch.set_num_threads(threads)
        torch.manual_seed(1)
        rng = np.random.default_rng(2)
        table = phrases()
        n, kv = cfg["num_hidden_layers"], cfg["num_key_value_heads"]
        hd = cfg["hidden_size"] // cfg["num_attention_heads"]
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        model.train()
        t0 = time.time()
        for step in range(steps):
            seq = texts(rng, table, 8, TEXT)
            x, y = seq[:, :-1], seq[:, 1:]
            mask = torch.ones(x.shape, dtype=torch.int64)
            pos = torch.arange(TEXT).repeat(x.shape[0], 1)
            past = [torch.zeros(x.shape[0], kv, 0, hd) for _ in range(2 * n)]
            logits = model(x, mask, pos, *past)[0]
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 10 == 0 or step + 1 == steps:
                acc = (logits.argmax(-1) == y).float().mean().item()
                print(f"step {step}: loss {loss.item():.3f}, next-token accuracy {acc:.3f} ({time.time() - t0:.0f} s)", flush=True)
    return train


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    info = mg.make_llama(args.out, "llama-79m", 64, train=trainer(args.steps, args.threads))
    mg.write_json(os.path.join(args.out, "reference", "reference.json"), dict(info, model="llama-79m-phrases"), compact=False)
    table = phrases()
    rng = np.random.default_rng(3)
    prompts = [np.concatenate([table[i] for i in rng.integers(0, PHRASES, size=4)]).tolist() for _ in range(8)]
    with open(os.path.join(args.out, "phrases.json"), "w") as f:
        json.dump({"phrases": table.tolist(), "prompts": prompts}, f)
    print(f"{args.out}: trained llama-79m written")


if __name__ == "__main__":
    main()
