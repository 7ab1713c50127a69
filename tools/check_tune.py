#!/usr/bin/python3
"""Checks `mminfer tune` on the PP-OCRv4 folder and a make_ocr_eval.py set.

  check_tune.py EVAL_DIR --mminfer BIN [--models DIR] [--limit N] --work DIR

  - the chosen setting has the highest R of every setting tried within the CER floor, its CER is
    within the floor, and R = alpha*A - beta*C - gamma*D holds for each row of the report;
  - the folder it writes loads, and `mminfer ocr --pipeline OUT` on the same images gives the
    CER the report states (tools/ocr_eval.py's scoring, an independent implementation);
  - a set without ground_truth.json and a negative floor are one-line errors.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ocr_eval import levenshtein, normalize  # noqa: E402
from output_compare import verdict  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("eval")
    p.add_argument("--mminfer", required=True)
    p.add_argument("--models", default="models/ppocr")
    p.add_argument("--limit", type=int, default=14)
    p.add_argument("--work", required=True)
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failures = []
    out = os.path.join(args.work, "tuned")
    cmd = [args.mminfer, "tune", "--pipeline", args.models, "--eval", args.eval, "--limit", str(args.limit), "-o", out,
           "--json", "--threads", "1"]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        print(f"FAIL mminfer tune: {proc.stderr.strip()}")
        return 1
    report = json.loads(proc.stdout)
    a, b, g, floor = report["alpha"], report["beta"], report["gamma"], report["max_cer_increase"]
    base = report["tried"][0]
    chosen = next(t for t in report["tried"] if t["setting"] == report["chosen"])
    for t in report["tried"]:
        r = a * (1 - t["cer"] / 100) - b * t["median_ms"] / base["median_ms"] - g * (t["p90_ms"] - t["median_ms"]) / base["median_ms"]
        if abs(r - t["reward"]) > 1e-9:
            failures.append(f"{t['setting']}: R {t['reward']}, the formula gives {r}")
        if t["allowed"] != (t["cer"] <= base["cer"] + floor + 1e-9):
            failures.append(f"{t['setting']}: allowed {t['allowed']} at CER {t['cer']} (floor {base['cer'] + floor})")
        if t["allowed"] and t["reward"] > chosen["reward"] + 1e-12:
            failures.append(f"{t['setting']} has R {t['reward']} above the chosen {chosen['reward']}")
    if not chosen["allowed"]:
        failures.append(f"the chosen setting's CER {chosen['cer']} is beyond the floor")
    print(f"{len(report['tried'])} settings tried; chosen {report['chosen']}: CER {chosen['cer']:.3f}% "
          f"(from {base['cer']:.3f}%), {chosen['median_ms']:.1f} ms (from {base['median_ms']:.1f}), R {chosen['reward']:.4f}")

    # The written folder reads the same images to the CER the report states.
    with open(os.path.join(args.eval, "ground_truth.json"), encoding="utf-8") as f:
        items = json.load(f)["images"]
    take = min(args.limit, len(items))
    picked = [items[k * len(items) // take] for k in range(take)]
    files = [os.path.join(args.eval, it["file"]) for it in picked]
    proc = subprocess.run([args.mminfer, "ocr", "--pipeline", out, "--jsonl", "--threads", "1"] + files,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        failures.append(f"mminfer ocr --pipeline {out}: {proc.stderr.strip()}")
    else:
        by_file = {d["file"]: d for d in map(json.loads, proc.stdout.splitlines())}
        dist = ref = 0
        for it, f in zip(picked, files):
            hyp = normalize(" ".join(line["text"] for line in by_file[f]["lines"]))
            want = normalize(" ".join(it["lines"]))
            dist += levenshtein(hyp, want)
            ref += len(want)
        cer = 100 * dist / max(1, ref)
        ok = abs(cer - chosen["cer"]) < 1e-6
        print(f"{'ok  ' if ok else 'FAIL'} the written folder reads at CER {cer:.3f}%, the report says {chosen['cer']:.3f}%")
        if not ok:
            failures.append(f"the written folder reads at CER {cer:.4f}%, the report says {chosen['cer']:.4f}%")

    for eval_dir, extra, needle in ((args.work, [], "ground_truth.json"),
                                    (args.eval, ["--max-cer-increase", "-1"], "--max-cer-increase")):
        bad = ["--eval", eval_dir] + extra
        cmd = [args.mminfer, "tune", "--pipeline", args.models, "-o", out + "-bad"] + bad
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ok = proc.returncode == 1 and needle in proc.stderr and proc.stderr.count("\n") == 1
        print(f"{'ok  ' if ok else 'FAIL'} {' '.join(bad)}: {proc.stderr.strip()}")
        if not ok:
            failures.append(f"tune {' '.join(bad)}: exit {proc.returncode}, {proc.stderr.strip()!r}")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
