#!/usr/bin/python3
"""Runs `mminfer embed --audio ... --jsonl` on a folder made by tools/make_audio_encoder_pipeline.py
and compares each embedding with the one Python computed (reference/<stem>.mean.npy).

  check_audio_embed.py --mminfer BIN DIR [--min-cosine 0.99995]

The clips go through the command line in one call, so they share encoder batches as a user's
would; every one must reach --min-cosine (one clip is resampled by sox on the Python side and by
libsamplerate on ours, hence not 1). Then bad clips (an empty file, a WAV header with no samples,
text named .wav, random bytes) go in beside a good one: each must give one error line naming its
file, the good one must still come out, and the exit status must be 1.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mminfer", required=True)
    p.add_argument("dir")
    p.add_argument("--min-cosine", type=float, default=0.99995)
    args = p.parse_args()
    ref = os.path.join(args.dir, "reference")
    with open(os.path.join(ref, "cases.json")) as f:
        cases = json.load(f)["cases"]
    cmd = [args.mminfer, "embed", "--pipeline", args.dir, "--jsonl", "--threads", "2"]
    for c in cases:
        cmd += ["--audio", os.path.join(ref, c["file"])]
    proc = subprocess.run(cmd, capture_output=True, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"mminfer embed exited {proc.returncode}: {proc.stderr.decode(errors='replace').strip()}")
    rows = [json.loads(line) for line in proc.stdout.decode().splitlines() if line.strip()]
    if len(rows) != len(cases):
        sys.exit(f"{len(rows)} results for {len(cases)} clips")
    failures = []
    for c, row in zip(cases, rows):
        got = np.asarray(row["embedding"], dtype=np.float64)
        want = np.load(os.path.join(ref, c["stem"] + ".mean.npy")).astype(np.float64).reshape(-1)
        if row.get("modality") != "audio" or got.shape != want.shape:
            failures.append(f"{c['file']}: modality {row.get('modality')}, {got.shape[0]} values, expected {want.shape[0]}")
            continue
        cos = float(got @ want / (np.linalg.norm(got) * np.linalg.norm(want)))
        print(f"{c['file']}: cosine {cos:.9f}")
        if not cos >= args.min_cosine:
            failures.append(f"{c['file']}: cosine {cos:.9f} < {args.min_cosine}")
    failures += check_bad_clips(args, os.path.join(ref, cases[0]["file"]))
    if failures:
        sys.exit("check_audio_embed: " + "; ".join(failures))


def wav_header(frames):
    data = frames * 2
    return (b"RIFF" + struct.pack("<I", 36 + data) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 1, 16000, 32000, 2, 16)
            + b"data" + struct.pack("<I", data))


def check_bad_clips(args, good):
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        bad = {"empty.wav": b"", "no_samples.wav": wav_header(0), "text.wav": b"hello, this is not audio\n" * 40,
               "noise.flac": bytes((i * 7919) % 256 for i in range(5000))}
        paths = []
        for name, data in bad.items():
            paths.append(os.path.join(tmp, name))
            with open(paths[-1], "wb") as f:
                f.write(data)
        cmd = [args.mminfer, "embed", "--pipeline", args.dir, "--jsonl", "--audio", good]
        for path in paths:
            cmd += ["--audio", path]
        proc = subprocess.run(cmd, capture_output=True, timeout=300)
        out = [line for line in proc.stdout.decode().splitlines() if line.strip()]
        err = [line for line in proc.stderr.decode(errors="replace").splitlines() if line.strip()]
        if proc.returncode != 1:
            failures.append(f"bad clips: exit status {proc.returncode}, expected 1")
        if not out or "embedding" not in json.loads(out[0]):
            failures.append("bad clips: the good clip beside them gave no embedding")
        for path in paths:
            lines = [e for e in err if os.path.basename(path) in e]
            if len(lines) != 1:
                failures.append(f"{os.path.basename(path)}: {len(lines)} error lines, expected 1")
            else:
                print(f"{os.path.basename(path)}: {lines[0]}")
    return failures


if __name__ == "__main__":
    main()
