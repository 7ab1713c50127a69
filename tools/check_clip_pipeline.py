#!/usr/bin/python3
"""Runs `mminfer embed --jsonl` and `mminfer classify --jsonl` on a pipeline folder made by
tools/make_clip_pipeline.py and compares them with torch's answers in its reference/ folder.

  check_clip_pipeline.py --mminfer BIN DIR [--threads N] [--min-cosine 0.9999] [--atol 1e-4] [--prob-atol 1e-4]

Every embedding must have cosine >= --min-cosine and max |difference| <= --atol against
torch's; every label probability must be within --prob-atol, and labels must come highest
first. The last reference text goes through --text-file, the others through --text.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile


def run_json(cmd):
    proc = subprocess.run(cmd, capture_output=True, timeout=300)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd[:3])} ... exited {proc.returncode}: {proc.stderr.decode(errors='replace').strip()}")
    return [json.loads(line) for line in proc.stdout.decode().splitlines() if line.strip()]


def compare_embedding(what, got, want, args, worst):
    if len(got) != len(want):
        return [f"{what}: {len(got)} values, torch has {len(want)}"]
    dot = sum(a * b for a, b in zip(got, want))
    cosine = dot / (math.sqrt(sum(a * a for a in got)) * math.sqrt(sum(b * b for b in want)))
    diff = max(abs(a - b) for a, b in zip(got, want))
    worst["cosine"] = min(worst["cosine"], cosine)
    worst["abs"] = max(worst["abs"], diff)
    problems = []
    if cosine < args.min_cosine:
        problems.append(f"{what}: cosine {cosine:.7f} < {args.min_cosine}")
    if diff > args.atol:
        problems.append(f"{what}: max abs difference {diff:.3g} > {args.atol}")
    return problems


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mminfer", required=True)
    p.add_argument("dir")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--min-cosine", type=float, default=0.9999)
    p.add_argument("--atol", type=float, default=1e-4)
    p.add_argument("--prob-atol", type=float, default=1e-4)
    args = p.parse_args()

    with open(os.path.join(args.dir, "reference", "expected.json"), encoding="utf-8") as f:
        expected = json.load(f)
    ref = os.path.join(args.dir, "reference")
    base = [args.mminfer, "embed", "--pipeline", args.dir, "--jsonl", "--threads", str(args.threads)]
    problems, worst = [], {"cosine": 1.0, "abs": 0.0, "prob": 0.0}

    with tempfile.TemporaryDirectory() as tmp:
        text_file = os.path.join(tmp, "last.txt")
        with open(text_file, "w", encoding="utf-8") as f:
            f.write(expected["texts"][-1]["text"])
        cmd = list(base)
        for image in expected["images"]:
            cmd += ["--image", os.path.join(ref, image["file"])]
        for text in expected["texts"][:-1]:
            cmd += ["--text", text["text"]]
        cmd += ["--text-file", text_file]
        results = run_json(cmd)

    wanted = [("image", os.path.join(ref, i["file"]), i["embedding"]) for i in expected["images"]]
    wanted += [("text", t["text"], t["embedding"]) for t in expected["texts"][:-1]]
    wanted += [("text", text_file, expected["texts"][-1]["embedding"])]
    if len(results) != len(wanted):
        sys.exit(f"embed printed {len(results)} results for {len(wanted)} inputs")
    for (modality, name, want), got in zip(wanted, results):
        if got.get("modality") != modality or got.get("input") != name or "embedding" not in got:
            problems.append(f"embed result {got.get('input')!r} ({got.get('modality')}) where {name!r} ({modality}) belongs: {got}")
            continue
        problems += compare_embedding(f"{modality} {name[:40]!r}", got["embedding"], want, args, worst)

    for spec in expected["classify"]:
        cmd = [args.mminfer, "classify", "--pipeline", args.dir, "--jsonl", "--threads", str(args.threads)]
        for r in spec["results"]:
            cmd += ["--image", os.path.join(ref, r["file"])]
        if not spec["from_manifest"]:
            cmd += ["--labels", ",".join(spec["labels"]), "--templates", "|".join(spec["templates"])]
        results = run_json(cmd)
        if len(results) != len(spec["results"]):
            sys.exit(f"classify printed {len(results)} results for {len(spec['results'])} images")
        for want, got in zip(spec["results"], results):
            scores = [(entry["label"], entry["score"]) for entry in got["labels"]]
            if sorted(label for label, _ in scores) != sorted(want["probs"]):
                problems.append(f"classify {want['file']}: labels {scores}, expected {sorted(want['probs'])}")
                continue
            if any(a[1] < b[1] for a, b in zip(scores, scores[1:])):
                problems.append(f"classify {want['file']}: scores not highest first: {scores}")
            for label, score in scores:
                diff = abs(score - want["probs"][label])
                worst["prob"] = max(worst["prob"], diff)
                if diff > args.prob_atol:
                    problems.append(f"classify {want['file']} {label!r}: {score:.6f}, torch {want['probs'][label]:.6f}")

    print(f"{len(wanted)} embeddings: min cosine {worst['cosine']:.8f}, max abs difference {worst['abs']:.3g}; "
          f"{sum(len(s['results']) for s in expected['classify'])} classifications: max probability difference {worst['prob']:.3g}")
    for problem in problems:
        print("FAIL " + problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
