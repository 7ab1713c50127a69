#!/usr/bin/python3
"""Checks `mminfer classify --cascade H` (an INT8 image tower first, the full one for unsure images).

  check_classify_cascade.py CLIP_DIR --mminfer BIN

On the images of a clip pipeline folder (reference/images):
  - H = 0 sends every image to the full tower: scores equal plain classify's;
  - H above log(labels) sends none: scores equal `classify --precision vision=int8`;
  - H between the images' entropies escalates exactly the images whose INT8 entropy is above H,
    and each keeps the answer of the tower that decided it;
  - with --cascade-merge-tokens R the light tower also merges tokens; a negative H is an error.
"""
import argparse
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from output_compare import verdict  # noqa: E402


def classify(args, images, extra):
    cmd = [args.mminfer, "classify", "--pipeline", args.clip, "--json"] + [x for i in images for x in ("--image", i)] + extra
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"classify {' '.join(extra)}: {out.stderr.strip()}")
    return json.loads(out.stdout)["results"]


def entropy(result):
    return -sum(l["score"] * math.log(l["score"]) for l in result["labels"] if l["score"] > 0)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("clip")
    p.add_argument("--mminfer", required=True)
    args = p.parse_args()
    folder = os.path.join(args.clip, "reference", "images")
    images = sorted(os.path.join(folder, f) for f in os.listdir(folder))
    failures = []
    full = classify(args, images, [])
    light = classify(args, images, ["--precision", "vision=int8"])
    every = classify(args, images, ["--cascade", "0"])
    none = classify(args, images, ["--cascade", "100"])
    for i, f in enumerate(images):
        if every[i]["labels"] != full[i]["labels"] or not every[i]["escalated"]:
            failures.append(f"{f}: --cascade 0 gave {every[i]}, the full tower {full[i]['labels']}")
        if none[i]["labels"] != light[i]["labels"] or none[i]["escalated"]:
            failures.append(f"{f}: --cascade 100 gave {none[i]}, the INT8 tower {light[i]['labels']}")
    h = sorted(entropy(r) for r in light)
    mid = (h[len(h) // 2 - 1] + h[len(h) // 2]) / 2
    some = classify(args, images, ["--cascade", repr(mid)])
    for i, f in enumerate(images):
        want_up = entropy(light[i]) > mid
        want = full[i] if want_up else light[i]
        if some[i]["escalated"] != want_up or some[i]["labels"] != want["labels"]:
            failures.append(f"{f}: --cascade {mid:.6f} escalated {some[i]['escalated']} (INT8 entropy {entropy(light[i]):.6f})")
    merged = classify(args, images, ["--cascade", "100", "--cascade-merge-tokens", "1"])
    differs = sum(m["labels"] != l["labels"] for m, l in zip(merged, light))
    print(f"{len(images)} images; escalated at H = {mid:.6f}: {sum(r['escalated'] for r in some)}; "
          f"merging 1 token per block changed {differs} answers of the light tower")
    if differs == 0:
        failures.append("--cascade-merge-tokens 1 changed nothing the light tower answered")
    proc = subprocess.run([args.mminfer, "classify", "--pipeline", args.clip, "--image", images[0], "--cascade", "-1"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 1 or "--cascade" not in proc.stderr:
        failures.append(f"--cascade -1: exit {proc.returncode}, {proc.stderr.strip()!r}")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
