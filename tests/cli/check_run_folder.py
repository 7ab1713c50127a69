"""`mminfer run DIR INPUT...`: a model folder picks its own command.

A folder as it is downloaded or exported (Optimum's and transformers.js's layouts, with no
pipeline.json) or a pipeline folder runs without the user naming generate, transcribe, caption,
chat, embed, classify or ocr. For each kind, `run DIR` must give what the named command gives on
the same inputs (timings aside), and for llama-tiny torch's own tokens. Folders it cannot place get
one line, exit 1; a recognised folder without inputs gets its command's usage, exit 2.

usage: check_run_folder.py --mminfer BIN --models GENERATIVE_MODELS_DIR --captioner DIR --clip DIR
                           --ppocr DIR --work DIR
"""
import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import wave

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def mminfer(binary, *args):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def without_timings(doc):
    """The document with every timing dropped: keys ending in _ms, per_token, per_s, or 'ms'."""
    if isinstance(doc, dict):
        return {k: without_timings(v) for k, v in doc.items()
                if not (k == "ms" or k.endswith("_ms") or k.endswith("per_token") or k.endswith("per_s"))}
    if isinstance(doc, list):
        return [without_timings(v) for v in doc]
    return doc


def documents(text):
    """--json output: one document, or one per line (chat prints a line per question)."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def same_as_named(a, label, folder, command, inputs):
    """run FOLDER INPUTS --json against COMMAND --pipeline FOLDER INPUTS --json; returns run's documents."""
    rc, out, err = mminfer(a.mminfer, "run", folder, *inputs, "--json")
    named_rc, named, named_err = mminfer(a.mminfer, command, "--pipeline", folder, *inputs, "--json")
    got = without_timings(documents(out)) if rc == 0 else err.strip()[:200]
    want = without_timings(documents(named)) if named_rc == 0 else named_err.strip()[:200]
    check(rc == 0 and named_rc == 0 and got == want, f"{label}: run gives what {command} gives: {got if rc else ''}")
    return documents(out) if rc == 0 else []


def write_tone(path, seconds=1.5, rate=16000):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        n = int(seconds * rate)
        w.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / rate))) for i in range(n)))


def main():
    ap = argparse.ArgumentParser()
    for flag in ("--mminfer", "--models", "--captioner", "--clip", "--ppocr", "--work"):
        ap.add_argument(flag, required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    llama = os.path.join(a.models, "llama-tiny")
    whisper = os.path.join(a.models, "whisper-tiny-test")
    vlm = os.path.join(a.models, "vlm-tiny")
    image = os.path.join(a.captioner, "eval", "0000.png")

    # Text generation (config.json architectures): torch's tokens, and generate's document.
    ref = json.load(open(os.path.join(llama, "reference", "reference.json")))
    case = ref["cases"][0]
    docs = same_as_named(a, "llama-tiny (no pipeline.json)", llama, "generate",
                         [case["prompts"][0], "--max-new-tokens", "8"])
    check(bool(docs) and docs[0]["results"][0]["tokens"] == case["tokens"][0][:8], "llama-tiny: torch's first 8 tokens")

    # Speech to text (config.json model_type whisper), image to text (the trained captioner),
    # vision-language (vlm-tiny, transformers.js's layout).
    tone = os.path.join(a.work, "tone.wav")
    write_tone(tone)
    same_as_named(a, "whisper-tiny-test", whisper, "transcribe", [tone, "--max-new-tokens", "8"])
    docs = same_as_named(a, "shapes captioner", a.captioner, "caption", [image])
    check(bool(docs) and docs[0]["results"][0]["text"].startswith("a "), f"the captioner's caption: {docs and docs[0]}")
    vref = json.load(open(os.path.join(vlm, "reference", "reference.json")))["cases"][0]
    same_as_named(a, "vlm-tiny", vlm, "chat",
                  ["--image", os.path.join(vlm, "reference", vref["images"][0]), vref["questions"][0], "--max-new-tokens", "6"])

    # Pipeline folders: clip embeds, or classifies when given labels; ocr reads lines.
    same_as_named(a, "clip text", a.clip, "embed", ["--text", "a red square"])
    same_as_named(a, "clip labels", a.clip, "classify", ["--image", image, "--labels", "red,blue"])
    same_as_named(a, "PP-OCRv4 folder", a.ppocr, "ocr", [image])

    # What it cannot place, one line each; a known folder without inputs, its command's usage.
    empty = os.path.join(a.work, "empty")
    shutil.rmtree(empty, ignore_errors=True)
    os.makedirs(empty)
    unknown = os.path.join(a.work, "unknown-type")
    shutil.rmtree(unknown, ignore_errors=True)
    os.makedirs(unknown)
    json.dump({"type": "segmentation", "files": {}}, open(os.path.join(unknown, "pipeline.json"), "w"))
    odd = os.path.join(a.work, "odd-config")
    shutil.rmtree(odd, ignore_errors=True)
    os.makedirs(odd)
    json.dump({"model_type": "resnet"}, open(os.path.join(odd, "config.json"), "w"))
    for folder, code, text in [(empty, 1, "not a model folder mminfer recognises"),
                               (odd, 1, "not a model folder mminfer recognises"),
                               (unknown, 1, "unknown type 'segmentation'"),
                               (llama, 2, "usage: mminfer generate"),
                               (whisper, 2, "usage: mminfer transcribe")]:
        args = [folder] if code == 2 else [folder, "x"]
        rc, out, err = mminfer(a.mminfer, "run", *args)
        lines = err.strip().splitlines()
        check(rc == code and text in err and (code == 2 or len(lines) == 1), f"run {os.path.basename(folder)}: "
              f"exit {rc}, '{text}': {err.strip()[:200]}")
    # A model file is still a model file.
    rc, out, err = mminfer(a.mminfer, "run", os.path.join(a.clip, "text.onnx"))
    check(rc == 1 and "missing input 'input_ids'" in err, f"run MODEL.onnx without inputs: {err.strip()[:120]}")

    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
