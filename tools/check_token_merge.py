#!/usr/bin/python3
"""Checks token merging (`--merge-tokens R`) on the CLIP-shaped vision tower of
tools/reference_models.py against torch running the same algorithm.

  check_token_merge.py WORK --mminfer BIN

The torch reference merges after each block's attention residual: tokens alternate between A
(even positions, the class token at 0 excluded) and B (odd); each A token's match is the B token
whose attention input (the block's normalized tokens, which q, k and v are projected from) has
the highest cosine; the R best-matched A tokens merge
into their matches as size-weighted means; every other token keeps its place; later blocks add
log(size) to their attention scores. Checked:
  - the reference at R = 0 is the plain model (so the reference is the same model);
  - mminfer's pooled embedding and per-token states equal the reference's for several R, batch 1
    and 3, within 1e-4 relative;
  - the MatMul FLOPs mminfer executes equal the count for the shrinking token numbers;
  - a graph that is not a plain vision tower (the text tower's causal mask) runs unmerged, equal
    to its run without the flag;
  - `mminfer bench --merge-tokens 0,3,7` times one session per value in turn: one entry each,
    each against the first, the merged ones (only) running TokenMerge.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from check_prune import compare, export  # noqa: E402
from profile_work import trace_matmul_flops  # noqa: E402
from output_compare import load_output, run_mminfer, run_tool, verdict  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402


def merge(x, metric, size, r):
    """One merge step, per batch element; returns (x, size) with r tokens fewer."""
    t = x.shape[1]
    a_tokens, b_tokens = list(range(2, t, 2)), list(range(1, t, 2))
    r = min(r, len(a_tokens)) if t >= 2 else 0
    xs, sizes = [], []
    for b in range(x.shape[0]):
        unit = metric[b].double()
        unit = unit / unit.norm(dim=-1, keepdim=True)
        scores = unit[a_tokens] @ unit[b_tokens].T
        best, match = scores.max(dim=-1)
        order = sorted(range(len(a_tokens)), key=lambda i: -float(best[i]))
        gone = set()
        total = {j: (x[b, j].double() * size[b, j].double(), size[b, j].double()) for j in b_tokens}
        for i in order[:r]:
            a, j = a_tokens[i], b_tokens[int(match[i])]
            gone.add(a)
            s, w = total[j]
            total[j] = (s + x[b, a].double() * size[b, a].double(), w + size[b, a].double())
        keep = [i for i in range(t) if i not in gone]
        rows, new_sizes = [], []
        for i in keep:
            if i in total:
                s, w = total[i]
                rows.append((s / w).float())
                new_sizes.append(float(w))
            else:
                rows.append(x[b, i])
                new_sizes.append(float(size[b, i]))
        xs.append(torch.stack(rows))
        sizes.append(torch.tensor(new_sizes))
    return torch.stack(xs), torch.stack(sizes)


def forward_merged(model, pixel_values, r):
    x = model.patch_embed(pixel_values).flatten(2).transpose(1, 2)
    cls = model.class_embedding.expand(x.shape[0], 1, -1)
    x = torch.cat([cls, x], dim=1) + model.position_embedding
    x = model.pre_ln(x)
    size = torch.ones(x.shape[0], x.shape[1])
    for blk in model.blocks:
        h = blk.ln1(x)
        att = blk.attn
        b, t, w = h.shape
        q = att.split(att.q(h)) * (att.head_dim ** -0.5)
        k, v = att.split(att.k(h)), att.split(att.v(h))
        scores = q @ k.transpose(-1, -2) + torch.log(size)[:, None, None, :]
        ctx = torch.softmax(scores, dim=-1) @ v
        x = x + att.out(ctx.transpose(1, 2).reshape(b, t, w))
        x, size = merge(x, h, size, r)
        x = x + blk.fc2(blk.act(blk.fc1(blk.ln2(x))))
    return x, model.proj(model.post_ln(x[:, 0, :]))


def predicted_flops(model, tokens, batch, r):
    w = model.blocks[0].fc1.in_features
    hidden = model.blocks[0].fc1.out_features
    total, t = 0, tokens  # the patch embedding is a Conv, not counted
    for _ in model.blocks:
        total += 2 * batch * t * 4 * w * w + 4 * batch * t * t * w  # q, k, v, out; scores and context
        t = t - min(r, len(range(2, t, 2))) if t >= 2 else t
        total += 2 * batch * t * 2 * w * hidden  # the MLP after the merge
    total += 2 * batch * w * model.proj.out_features  # the pooled projection
    return total


def check_bench_in_turn(failures, mminfer, src, pixels):
    """`bench --merge-tokens 0,3,7 --op-times --json`: an entry per value, in order, each with its
    own figures and op times, the later ones against the first."""
    cmd = [mminfer, "bench", src, "--input", f"pixel_values={pixels}", "--merge-tokens", "0,3,7", "--runs", "3",
           "--warmup", "1", "--op-times", "--json", "--quiet"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    try:
        doc = json.loads(p.stdout)
        variants = doc["variants"]
        problems = []
        if [v["merge_tokens"] for v in variants] != [0, 3, 7]:
            problems.append(f"merge_tokens {[v['merge_tokens'] for v in variants]}")
        if doc["runs"] != 3 or any(v["median_ms"] <= 0 or v["min_ms"] > v["median_ms"] for v in variants):
            problems.append("figures")
        for v in variants[1:]:
            want = v["median_ms"] / variants[0]["median_ms"]
            if abs(v["vs_first"] - want) > 1e-3 * want or not v["vs_first_per_round"] > 0:
                problems.append(f"R {v['merge_tokens']}: vs_first {v['vs_first']}, medians give {want:.4f}")
        merging = ["TokenMerge" in v["op_ms"] for v in variants]
        if merging != [False, True, True]:
            problems.append(f"TokenMerge in op_ms: {merging}")
    except (ValueError, KeyError, TypeError, IndexError) as e:
        problems = [f"exit {p.returncode}, {e}: {p.stdout[:200]!r} {p.stderr[-200:]!r}"]
    print(f"{'FAIL' if problems else 'ok  '} bench --merge-tokens 0,3,7 in turn{': ' + '; '.join(problems) if problems else ''}")
    if problems:
        failures.append("bench --merge-tokens 0,3,7: " + "; ".join(problems))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("work")
    p.add_argument("--mminfer", required=True)
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failures = []
    import reference_models
    builder, seed = reference_models.MODELS["clip_vision"]
    model, cases, _ = builder(seed)
    src, _ = export("clip_vision", args.work)
    g = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for batch in (1, 3):
            pixels = torch.randn(batch, 3, 30, 37, generator=g)
            files = {"pixel_values": os.path.join(args.work, f"pixels_{batch}.npy")}
            np.save(files["pixel_values"], pixels.numpy())
            plain_states, plain_embeds = model(pixels)
            ref_states, ref_embeds = forward_merged(model, pixels, 0)
            compare(failures, f"batch {batch}: the reference at R = 0 vs the plain model", ref_embeds.numpy(),
                    plain_embeds.numpy(), rtol=1e-5)
            tokens = plain_states.shape[1]
            for r in (1, 3, 7):
                ref_states, ref_embeds = forward_merged(model, pixels, r)
                out = os.path.join(args.work, f"mm_b{batch}_r{r}")
                cmd = [args.mminfer, "run", src, "--input", f"pixel_values={files['pixel_values']}", "--output-dir", out,
                       "--merge-tokens", str(r)]
                run_tool(cmd, "mminfer run --merge-tokens")
                compare(failures, f"batch {batch} R {r}: image_embeds", load_output(out, "image_embeds"), ref_embeds.numpy())
                compare(failures, f"batch {batch} R {r}: last_hidden_state ({ref_states.shape[1]} of {tokens} tokens)",
                        load_output(out, "last_hidden_state"), ref_states.numpy())
                trace = os.path.join(args.work, f"trace_b{batch}_r{r}.json")
                run_tool([args.mminfer, "bench", src, "--input", f"pixel_values={files['pixel_values']}", "--opt-level", "0",
                          "--profile", trace, "--runs", "1", "--warmup", "0", "--quiet", "--merge-tokens", str(r)],
                         "mminfer bench --profile")
                got = trace_matmul_flops(trace)
                want = predicted_flops(model, tokens, batch, r)
                ok = got == want
                print(f"{'ok  ' if ok else 'FAIL'} batch {batch} R {r}: MatMul FLOPs {got}, counted from token numbers {want:.0f}")
                if not ok:
                    failures.append(f"batch {batch} R {r}: MatMul FLOPs {got}, expected {want:.0f}")
    check_bench_in_turn(failures, args.mminfer, src, files["pixel_values"])
    # A text tower (causal mask) is not merged: same outputs as without the flag.
    text, cases = export("clip_text", args.work)
    feeds = cases[0][1]
    files = {}
    for k, v in feeds.items():
        files[k] = os.path.join(args.work, f"text_{k}.npy")
        np.save(files[k], v.numpy())
    run_mminfer(args.mminfer, text, files, os.path.join(args.work, "text_plain"))
    cmd = [args.mminfer, "run", text, "--output-dir", os.path.join(args.work, "text_merge"), "--merge-tokens", "3"]
    cmd += [x for k, f in files.items() for x in ("--input", f"{k}={f}")]
    run_tool(cmd, "mminfer run --merge-tokens (text)")
    for o in ("last_hidden_state", "text_embeds"):
        compare(failures, f"text tower with --merge-tokens 3: {o} unchanged", load_output(os.path.join(args.work, "text_merge"), o),
                load_output(os.path.join(args.work, "text_plain"), o), rtol=0)
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
