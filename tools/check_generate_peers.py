#!/usr/bin/env python3
"""Checks that the benchmark peers of generation run the real greedy loop: ONNX Runtime's
present->past loop (tools/ort_generate_bench.js) and PyTorch eager with the weights read back
from model.onnx (bench/torch_generate.py) give the new tokens of the folder's reference/ (torch's
own loop at export time) for every prompt.

    check_generate_peers.py FOLDER"""
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    folder = sys.argv[1]
    with open(os.path.join(folder, "reference", "reference.json")) as f:
        ref = json.load(f)
    cases = {}
    for case in ref["cases"]:
        for prompt, tokens in zip(case["prompt_ids"], case["tokens"]):
            cases.setdefault(tuple(prompt), tokens)
    peers = {"ONNX Runtime": [os.environ.get("MMINFER_NODE", "node"), os.path.join(ROOT, "tools", "ort_generate_bench.js"), folder,
                              "--repeats", "1"],
             "PyTorch": [sys.executable, os.path.join(ROOT, "bench", "torch_generate.py"), folder, "--repeats", "1"]}
    failures = 0
    for name, cmd in peers.items():
        for prompt, want in cases.items():
            r = subprocess.run(cmd + ["--prompt", ",".join(map(str, prompt)), "--new-tokens", str(len(want))],
                               capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"check_generate_peers.py: {name} failed: {r.stderr.strip()}")
            got = json.loads(r.stdout.strip().splitlines()[-1])["tokens"]
            agree = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), len(want))
            ok = agree == len(want) and len(got) == len(want)
            failures += not ok
            print(f"{name}: prompt of {len(prompt)} tokens: {agree} of {len(want)} new tokens equal torch's reference"
                  f" {'ok' if ok else 'MISMATCH'}")
    if failures:
        sys.exit(f"check_generate_peers.py: {failures} peer runs differ from the reference")


if __name__ == "__main__":
    main()
