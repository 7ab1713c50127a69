#!/usr/bin/python3
"""Checks `mminfer ocr --cascade T` (an INT8 recognizer first, the full one for unsure lines).

  check_ocr_cascade.py EVAL_DIR --mminfer BIN [--models DIR]

On the images of a make_ocr_eval.py set:
  - T = 1 sends every line to the full recognizer: the lines equal plain `mminfer ocr`'s
    (texts exactly, scores within 1e-4), and "escalated" counts every line read;
  - a T below every confidence sends none but the lines the INT8 recognizer read as nothing: the
    lines equal the INT8 recognizer's alone (`--precision int8 --fp32-models det,cls`);
  - at T = 0.9 each line is the INT8 reading when that was at least 0.9 sure, else the full one;
  - thresholds outside (0, 1] are one-line errors.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from output_compare import verdict  # noqa: E402


def ocr(args, images, extra):
    cmd = [args.mminfer, "ocr", "--pipeline", args.models, "--jsonl", "--threads", "1"] + extra + images
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"mminfer ocr {' '.join(extra)} failed: {out.stderr.strip()}")
    return {d["file"]: d for d in map(json.loads, out.stdout.splitlines())}


def texts(result):
    return [line["text"] for line in result["lines"]]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("eval")
    p.add_argument("--mminfer", required=True)
    p.add_argument("--models", default="models/ppocr")
    args = p.parse_args()
    images = sorted(os.path.join(root, f) for root, _, files in os.walk(args.eval) for f in files
                    if f.endswith((".png", ".jpg")))
    failures = []
    full = ocr(args, images, [])
    light = ocr(args, images, ["--precision", "int8", "--fp32-models", "det,cls"])
    every = ocr(args, images, ["--cascade", "1"])
    none = ocr(args, images, ["--cascade", "1e-9"])
    mid = ocr(args, images, ["--cascade", "0.9"])
    escalated_every = escalated_mid = escalated_none = 0
    for f in images:
        if texts(every[f]) != texts(full[f]) or any(abs(a["score"] - b["score"]) > 1e-4
                                                    for a, b in zip(every[f]["lines"], full[f]["lines"])):
            failures.append(f"{f}: --cascade 1 read {texts(every[f])}, the full recognizer {texts(full[f])}")
        if texts(none[f]) != texts(light[f]):
            failures.append(f"{f}: --cascade 1e-9 read {texts(none[f])}, the INT8 recognizer {texts(light[f])}")
        if every[f]["escalated"] < len(every[f]["lines"]):
            failures.append(f"{f}: --cascade 1 escalated {every[f]['escalated']} of {len(every[f]['lines'])} lines")
        escalated_every += every[f]["escalated"]
        escalated_mid += mid[f]["escalated"]
        escalated_none += none[f]["escalated"]
        # Each line at 0.9 is one of the two readings of that line.
        sure = {line["text"] for line in light[f]["lines"] if line["score"] >= 0.9}
        for line in mid[f]["lines"]:
            if line["text"] not in sure and line["text"] not in texts(full[f]):
                failures.append(f"{f}: --cascade 0.9 read '{line['text']}', neither reading of the line")
    lines = sum(len(full[f]["lines"]) for f in images)
    print(f"{len(images)} images, {lines} lines; escalated at T = 1: {escalated_every}, at T = 0.9: {escalated_mid}, "
          f"at T = 1e-9 (lines read as nothing): {escalated_none}")
    for bad in ("0", "1.5", "abc"):
        proc = subprocess.run([args.mminfer, "ocr", "--pipeline", args.models, "--cascade", bad, images[0]],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ok = proc.returncode == 1 and proc.stderr.count("\n") == 1 and "--cascade" in proc.stderr
        print(f"{'ok  ' if ok else 'FAIL'} --cascade {bad}: {proc.stderr.strip()}")
        if not ok:
            failures.append(f"--cascade {bad}: exit {proc.returncode}, {proc.stderr.strip()!r}")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
