#!/usr/bin/env python3
"""Reference decisions for src/generate, made with torch ops the plain way.

Writes two JSON files that tests/generate compares against:
  processors.json  fixed random logits rows, the Hugging Face-style processors and warpers a
                   generation config asks for applied in torch, and each row's greedy token;
  beam.json        beam searches driven by scripted logits (a hash of the prefix, so no model is
                   needed and the C++ side computes the same float32 values), every step's
                   parent indices and tokens, and the final hypotheses with their scores.
Ties resolve toward the lower token id everywhere (stable sorts), as the C++ code does.
"""
import argparse
import json
import pathlib

import torch

import whisper_timestamps

MASK64 = (1 << 64) - 1


# --- scripted logits: the same integer recipe as tests/generate/scripted_logits.h -------------
def mix64(x):
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def scripted_logits(prefix, vocab, eos_ids, prompt_length, eos_ramp):
    h = 0x9E3779B97F4A7C15
    for t in prefix:
        h = mix64(h ^ (t + 1))
    row = []
    for v in range(vocab):
        x = mix64(h ^ (((v + 1) * 0xD1B54A32D192ED03) & MASK64))
        row.append(((x >> 40) % 4096) / 512.0 - 4.0)
    for e in eos_ids:  # EOS grows likelier with each new token, so hypotheses end at many lengths
        row[e] += eos_ramp * (len(prefix) - prompt_length)
    return torch.tensor(row, dtype=torch.float32)


# --- processors ----------------------------------------------------------------------------
def eos_list(cfg):
    eos = cfg.get("eos_token_id", [])
    return eos if isinstance(eos, list) else [eos]


def process(scores, seqs, prompt_lengths, cfg):
    """scores [N, V] float32; seqs[i] the whole sequence of row i."""
    scores = scores.clone()
    penalty = cfg.get("repetition_penalty", 1.0)
    ngram = cfg.get("no_repeat_ngram_size", 0)
    forced = dict((i, t) for i, t in cfg.get("forced_decoder_ids", []))
    last_forced = cfg["forced_decoder_ids"][-1][0] if cfg.get("forced_decoder_ids") else 0
    for i, seq in enumerate(seqs):
        row = scores[i]
        if penalty != 1.0 and seq:
            ids = torch.tensor(seq, dtype=torch.long)
            picked = torch.gather(row, 0, ids)
            picked = torch.where(picked < 0, picked * penalty, picked / penalty)
            row.scatter_(0, ids, picked)
        if ngram > 0 and len(seq) + 1 >= ngram:
            tail = tuple(seq[len(seq) - (ngram - 1):])
            for s in range(len(seq) - ngram + 1):
                if tuple(seq[s:s + ngram - 1]) == tail:
                    row[seq[s + ngram - 1]] = -float("inf")
        if len(seq) - prompt_lengths[i] < cfg.get("min_new_tokens", 0):
            row[eos_list(cfg)] = -float("inf")
        if cfg.get("suppress_tokens"):
            row[cfg["suppress_tokens"]] = -float("inf")
        if cfg.get("begin_suppress_tokens") and len(seq) == prompt_lengths[i] + last_forced:
            row[cfg["begin_suppress_tokens"]] = -float("inf")
        if len(seq) in forced:
            token = forced[len(seq)]
            row.fill_(-float("inf"))
            row[token] = 0.0
        if cfg.get("timestamps"):  # Whisper's rules: eot, no_timestamps, timestamp_begin, max_initial_index
            whisper_timestamps.apply_rules(row, seq[prompt_lengths[i]:], **cfg["timestamps"])
    return scores


def warp(scores, cfg):
    scores = scores / cfg.get("temperature", 1.0)
    k = cfg.get("top_k", 50)
    if k > 0 and k < scores.shape[-1]:
        kth = torch.topk(scores, k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, -float("inf"))
    p = cfg.get("top_p", 1.0)
    if p < 1.0:
        ordered, order = torch.sort(scores, dim=-1, descending=True, stable=True)
        probs = torch.softmax(ordered.double(), dim=-1)
        before = torch.cumsum(probs, dim=-1) - probs
        remove = before >= p
        remove[..., 0] = False
        scores = scores.masked_fill(remove.scatter(-1, order, remove), -float("inf"))
    min_p = cfg.get("min_p", 0.0)
    if min_p > 0.0:
        probs = torch.softmax(scores.double(), dim=-1)
        threshold = min_p * probs.max(dim=-1, keepdim=True).values
        remove = probs < threshold
        top = torch.argmax(scores, dim=-1, keepdim=True)
        remove.scatter_(-1, top, False)
        scores = scores.masked_fill(remove, -float("inf"))
    return scores


def first_argmax(row):
    return int((row == row.max()).nonzero()[0])


def finite_or_none(row):
    return [None if v == -float("inf") else v for v in row.tolist()]


def processor_cases():
    vocab = 40
    cases = [
        ("temperature", {"do_sample": True, "temperature": 0.7, "top_k": 0}, False),
        ("top_k", {"do_sample": True, "top_k": 5}, True),
        ("top_k_all_ties", {"do_sample": True, "top_k": 3}, True),
        ("top_p_0.8", {"do_sample": True, "top_k": 0, "top_p": 0.8}, False),
        ("top_p_0.5_ties", {"do_sample": True, "top_k": 0, "top_p": 0.5}, True),
        ("min_p", {"do_sample": True, "top_k": 0, "min_p": 0.2}, False),
        ("repetition_penalty", {"repetition_penalty": 1.3}, False),
        ("no_repeat_2gram", {"no_repeat_ngram_size": 2}, False),
        ("no_repeat_3gram", {"no_repeat_ngram_size": 3}, False),
        ("suppress", {"suppress_tokens": [1, 2, 3], "begin_suppress_tokens": [7, 8]}, False),
        ("forced", {"forced_decoder_ids": [[1, 9], [2, 4], [3, 11]], "begin_suppress_tokens": [5, 6]}, False),
        ("min_new_tokens", {"eos_token_id": [3, 4], "min_new_tokens": 3}, False),
        ("greedy_combined", {"repetition_penalty": 1.2, "no_repeat_ngram_size": 2, "eos_token_id": 2,
                             "min_new_tokens": 2, "suppress_tokens": [0]}, False),
        ("sampling_combined", {"do_sample": True, "repetition_penalty": 1.2, "no_repeat_ngram_size": 2,
                               "temperature": 0.8, "top_k": 10, "top_p": 0.9, "min_p": 0.05,
                               "eos_token_id": 2, "min_new_tokens": 2}, False),
    ]
    gen = torch.Generator().manual_seed(17)
    out = []
    for name, cfg, ties in cases:
        rows = 6
        logits = torch.randn(rows, vocab, generator=gen) * 2.0
        if ties:  # coarse values: many equal logits, so tie rules are exercised
            logits = torch.round(logits * 2.0) / 2.0
        if name == "top_k_all_ties":
            logits[0].fill_(1.0)
        seqs, prompts = [], []
        for r in range(rows):
            length = 1 + r
            seq = torch.randint(0, 6, (length,), generator=gen).tolist()  # small ids repeat often
            if r >= 3:
                seq = seq + seq[:3]
            seqs.append(seq)
            prompts.append(1 if r % 2 == 0 else min(2, len(seq)))
        processed = process(logits, seqs, prompts, cfg)
        if cfg.get("do_sample"):
            processed = warp(processed, cfg)
        out.append({"name": name, "config": cfg, "vocab": vocab, "logits": logits.tolist(), "sequences": seqs,
                    "prompt_lengths": prompts, "expected": [finite_or_none(r) for r in processed],
                    "greedy": [first_argmax(r) for r in processed]})
    return out


# --- beam search -----------------------------------------------------------------------------
def add_hypothesis(hyps, tokens, sum_logprobs, generated, num_beams, length_penalty):
    score = sum_logprobs / (generated ** length_penalty)
    if len(hyps["kept"]) < num_beams or score > hyps["worst"]:
        hyps["kept"].append((score, tokens))
        if len(hyps["kept"]) > num_beams:
            ranked = sorted((s, i) for i, (s, _) in enumerate(hyps["kept"]))
            del hyps["kept"][ranked[0][1]]
            hyps["worst"] = ranked[1][0]
        else:
            hyps["worst"] = min(score, hyps["worst"])


def hypotheses_done(hyps, best, length, case, prompt_length):
    if len(hyps["kept"]) < case["num_beams"]:
        return False
    if case["early_stopping"] is True:
        return True
    generated = length - prompt_length
    if case["early_stopping"] == "never" and case["length_penalty"] > 0:
        generated = case["max_length"] - prompt_length
    return hyps["worst"] >= best / (generated ** case["length_penalty"])


def beam_search(case, logits_fn=None):
    """Hugging Face's beam search over scripted logits, or over logits_fn(sequences) -> [rows, vocab]
    (a model's last-position logits for each row's whole sequence)."""
    vocab, beams, eos = case["vocab"], case["num_beams"], case["eos_token_id"]
    prompts = case["prompts"]
    batch, prompt_length = len(prompts), len(prompts[0])
    cfg = case.get("config", {})
    seqs = [list(p) for p in prompts for _ in range(beams)]
    beam_scores = torch.zeros(batch, beams)
    beam_scores[:, 1:] = -1e9
    beam_scores = beam_scores.view(-1)
    hyps = [{"kept": [], "worst": 1e9, "done": False} for _ in range(batch)]
    steps = []
    length = prompt_length
    keep = max(2, 1 + len(eos)) * beams
    while True:
        if logits_fn:
            logits = torch.as_tensor(logits_fn(seqs), dtype=torch.float32)
        else:
            logits = torch.stack([scripted_logits(s, vocab, eos, prompt_length, case["eos_ramp"]) for s in seqs])
        scores = torch.log_softmax(logits, dim=-1)
        scores = process(scores, seqs, [prompt_length] * len(seqs), cfg)
        scores = (scores + beam_scores[:, None]).view(batch, beams * vocab)
        ranked, order = torch.sort(scores, dim=-1, descending=True, stable=True)
        ranked, order = ranked[:, :keep], order[:, :keep]
        next_seqs, next_scores = [None] * len(seqs), torch.zeros(len(seqs))
        indices, tokens = list(range(len(seqs))), [case["pad_token_id"]] * len(seqs)
        for b in range(batch):
            if hyps[b]["done"]:
                for k in range(beams):
                    next_seqs[b * beams + k] = seqs[b * beams + k] + [case["pad_token_id"]]
                continue
            filled = 0
            for rank in range(keep):
                parent = b * beams + int(order[b, rank]) // vocab
                token = int(order[b, rank]) % vocab
                score = float(ranked[b, rank])
                if token in eos:
                    if rank >= beams:
                        continue
                    add_hypothesis(hyps[b], seqs[parent] + [token], score, length + 1 - prompt_length,
                                   beams, case["length_penalty"])
                    continue
                row = b * beams + filled
                indices[row], tokens[row], next_scores[row] = parent, token, score
                next_seqs[row] = seqs[parent] + [token]
                filled += 1
                if filled == beams:
                    break
            hyps[b]["done"] = hypotheses_done(hyps[b], float(ranked[b, 0]), length + 1, case, prompt_length)
        steps.append({"beam_indices": indices, "tokens": tokens})
        seqs, beam_scores, length = next_seqs, next_scores, length + 1
        if length >= case["max_length"] or all(h["done"] for h in hyps):
            break
    results = []
    for b in range(batch):
        if not hyps[b]["done"]:
            for k in range(beams):
                row = b * beams + k
                add_hypothesis(hyps[b], seqs[row], float(beam_scores[row]), len(seqs[row]) - prompt_length,
                               beams, case["length_penalty"])
        best = sorted(hyps[b]["kept"], key=lambda h: -h[0])[:case["num_return_sequences"]]
        results.append([{"tokens": t, "score": s} for s, t in best])
    return steps, results


def beam_cases():
    base = {"vocab": 12, "eos_token_id": [2], "pad_token_id": 0, "eos_ramp": 0.625, "prompts": [[1, 5], [1, 7]],
            "max_length": 14, "num_return_sequences": 1}
    variants = [
        {"name": "heuristic", "num_beams": 3, "length_penalty": 1.0, "early_stopping": False},
        {"name": "early_true", "num_beams": 4, "length_penalty": 2.0, "early_stopping": True},
        {"name": "never_positive", "num_beams": 4, "length_penalty": 0.5, "early_stopping": "never"},
        {"name": "never_negative", "num_beams": 3, "length_penalty": -0.5, "early_stopping": "never",
         "num_return_sequences": 2},
        {"name": "two_eos_processors", "num_beams": 2, "length_penalty": 1.0, "early_stopping": False,
         "eos_token_id": [2, 5], "config": {"no_repeat_ngram_size": 2, "repetition_penalty": 1.5}},
        {"name": "slow_eos_max_length", "num_beams": 3, "length_penalty": 1.0, "early_stopping": False,
         "eos_ramp": 0.0, "max_length": 9, "num_return_sequences": 3},
        {"name": "forced_prefix", "num_beams": 3, "length_penalty": 1.0, "early_stopping": False,
         "prompts": [[1]], "config": {"forced_decoder_ids": [[1, 9], [2, 4]], "suppress_tokens": [3],
                                      "begin_suppress_tokens": [2, 6]}},
    ]
    out = []
    for v in variants:
        case = dict(base)
        case.update(v)
        steps, results = beam_search(case)
        case["steps"], case["results"] = steps, results
        out.append(case)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=pathlib.Path)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "processors.json").write_text(json.dumps({"cases": processor_cases()}))
    (args.out / "beam.json").write_text(json.dumps({"cases": beam_cases()}))
    print(f"wrote {args.out}/processors.json and beam.json")


if __name__ == "__main__":
    main()
