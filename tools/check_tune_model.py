#!/usr/bin/python3
"""Checks `mminfer tune MODEL.onnx` on a small CLIP-shaped vision tower.

  check_tune_model.py VISION.onnx --mminfer BIN --work DIR

  - every row of the report holds R = alpha*A - beta*C - gamma*D; the rows within the floor are
    exactly those whose lowest cosine reaches it; the chosen variant has the highest R of them;
  - the written model run by `mminfer run` (with --merge-tokens where merging was chosen) gives
    the report's mean cosine to the original's outputs on the evaluation inputs, and ONNX Runtime
    runs it (when no load-time option is needed) within 1e-3 of that;
  - with a floor of 1 and FP32 only, nothing that changes the outputs is chosen;
  - bad lists and a missing --eval are one-line errors.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p.returncode, p.stdout, p.stderr


def outputs(args, model, files, extra, out_dir, engine="mminfer"):
    os.makedirs(out_dir, exist_ok=True)
    got = []
    for i, f in enumerate(files):
        d = os.path.join(out_dir, str(i))
        if engine == "mminfer":
            cmd = [args.mminfer, "run", model, "--input", f"pixel_values={f}", "--outputs", "image_embeds", "--output-dir", d] + extra
        else:
            cmd = [os.environ.get("MMINFER_NODE", "node"), os.path.join(HERE, "ort_run.js"), model, "--output-dir", d,
                   "--input", f"pixel_values={f}"]
        rc, out, err = run(cmd)
        if rc != 0:
            raise RuntimeError(f"{engine} run {model}: {err.strip()[:300]}")
        got.append(np.load(os.path.join(d, "image_embeds.npy")).astype(np.float64).ravel())
    return got


def cosine(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("--mminfer", required=True)
    p.add_argument("--work", required=True)
    args = p.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    rng = np.random.default_rng(3)
    files = {}
    for kind, n in (("calib", 16), ("eval", 5)):
        d = os.path.join(args.work, kind)
        os.makedirs(d)
        files[kind] = []
        for i in range(n):
            f = os.path.join(d, f"{i:02d}.npy")
            np.save(f, rng.standard_normal((1, 3, 64, 64)).astype(np.float32))
            files[kind].append(f)
    failures = []
    base = [args.mminfer, "tune", args.model, "--calib", files["calib"][0].rsplit("/", 1)[0], "--eval",
            files["eval"][0].rsplit("/", 1)[0], "--outputs", "image_embeds", "--threads", "1", "--runs", "2", "--json", "--quiet"]
    out = os.path.join(args.work, "tuned.onnx")
    rc, stdout, err = run(base + ["-o", out, "--min-cosine", "0.99", "--prune", "0,0.25", "--merge", "0,2", "--low-rank", "off,0.05"])
    if rc != 0:
        print(f"FAIL mminfer tune: {err.strip()}")
        return 1
    rep = json.loads(stdout)
    alpha, beta, gamma = rep["alpha"], rep["beta"], rep["gamma"]
    start = rep["tried"][0]
    for row in rep["tried"]:
        if "error" in row:
            failures.append(f"{row['variant']} failed: {row['error']}")
            continue
        r = alpha * row["mean_cosine"] - beta * row["median_ms"] / start["median_ms"] - gamma * (row["p90_ms"] - row["median_ms"]) / start["median_ms"]
        if abs(r - row["reward"]) > 1e-6 * max(1, abs(r)):
            failures.append(f"{row['variant']}: R {row['reward']} but the formula gives {r}")
        if row["allowed"] != (row["min_cosine"] >= rep["min_cosine"] - 1e-12):
            failures.append(f"{row['variant']}: allowed {row['allowed']} at lowest cosine {row['min_cosine']}")
    allowed = [r for r in rep["tried"] if r["allowed"]]
    best = max(allowed, key=lambda r: r["reward"])
    c = rep["chosen"]
    chosen_row = next(r for r in rep["tried"] if (r["int8"], r["prune"], r["low_rank"], r["merge_tokens"]) ==
                      (c["int8"], c["prune"], c["low_rank"], c["merge_tokens"]))
    if chosen_row["reward"] < best["reward"] - 1e-12 and chosen_row is not best:
        # coordinate ascent may stop at a local best; it must still beat every move it tried from there
        failures.append(f"chosen {chosen_row['variant']} (R {chosen_row['reward']}) below {best['variant']} (R {best['reward']})")
    kinds = {(r["int8"], r["prune"] > 0, r["low_rank"] > 0, r["merge_tokens"] > 0) for r in rep["tried"]}
    if not any(k[0] for k in kinds) or not any(k[1] for k in kinds) or not any(k[2] for k in kinds) or not any(k[3] for k in kinds):
        failures.append(f"the search should try INT8, pruning, low rank and merging: {sorted(kinds)}")
    print(f"tune: chose {chosen_row['variant']}: mean cosine {chosen_row['mean_cosine']:.5f}, "
          f"{rep['speedup']:.2f}x the original's median, {len(rep['tried'])} variants tried")

    # The written file gives what the report says.
    reference = outputs(args, args.model, files["eval"], [], os.path.join(args.work, "ref"))
    extra = ["--merge-tokens", str(c["merge_tokens"])] if c["merge_tokens"] else []
    mine = outputs(args, out, files["eval"], extra, os.path.join(args.work, "mine"))
    mean = float(np.mean([cosine(a, b) for a, b in zip(mine, reference)]))
    if abs(mean - chosen_row["mean_cosine"]) > (1e-3 if c["int8"] else 1e-5):
        failures.append(f"the written file's mean cosine {mean:.6f}, the report's {chosen_row['mean_cosine']:.6f}")
    if not c["merge_tokens"]:
        theirs = outputs(args, out, files["eval"], [], os.path.join(args.work, "ort"), engine="ort")
        ort_mean = float(np.mean([cosine(a, b) for a, b in zip(theirs, reference)]))
        if abs(ort_mean - chosen_row["mean_cosine"]) > 1e-3:
            failures.append(f"ONNX Runtime on the written file: mean cosine {ort_mean:.6f}, the report's {chosen_row['mean_cosine']:.6f}")

    # Every pruned or factored graph tried, as written to the work folder, gives its row's cosine.
    checked = 0
    for row in rep["tried"]:
        if row["int8"] or row["merge_tokens"] or not (row["prune"] or row["low_rank"]) or "error" in row:
            continue
        f = os.path.join(out + ".tune", f"pruned-{row['prune']:.3f}-rank-{row['low_rank']:.4f}.onnx")
        got = outputs(args, f, files["eval"], [], os.path.join(args.work, f"row{checked}"))
        mean = float(np.mean([cosine(a, b) for a, b in zip(got, reference)]))
        if abs(mean - row["mean_cosine"]) > 1e-5:
            failures.append(f"{row['variant']}: {f} gives mean cosine {mean:.6f}, the report {row['mean_cosine']:.6f}")
        checked += 1
    if checked < 2:
        failures.append(f"only {checked} pruned or factored graphs checked")

    # A floor of 1, FP32 only: every pruned, factored or merged variant changes the outputs.
    rc, stdout, err = run(base + ["-o", os.path.join(args.work, "strict.onnx"), "--min-cosine", "1", "--precision", "fp32",
                                  "--prune", "0,0.25", "--merge", "0,2"])
    strict = json.loads(stdout) if rc == 0 else {}
    if strict.get("chosen") != {"int8": False, "prune": 0.0, "low_rank": 0.0, "merge_tokens": 0}:
        failures.append(f"--min-cosine 1: chose {strict.get('chosen')} {err.strip()[:200]}")

    for bad, needle in ((["--prune", "0.95"], "--prune takes"), (["--precision", "int4"], "--precision takes"),
                        (["--merge", "a"], "--merge takes")):
        rc, _, err = run(base + ["-o", os.path.join(args.work, "bad.onnx")] + bad)
        if rc == 0 or needle not in err or len(err.strip().splitlines()) != 1:
            failures.append(f"{' '.join(bad)}: expected one error line with '{needle}', got {err.strip()[:200]}")
    rc, _, err = run([args.mminfer, "tune", args.model, "--calib", "x", "-o", "y.onnx"])
    if rc == 0:
        failures.append("tune without --eval should fail")

    if failures:
        print(f"FAIL: {len(failures)} problems")
        for f in failures:
            print("  " + f)
        return 1
    print("tune MODEL: report consistent, the written file gives the reported cosine in mminfer and ONNX Runtime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
