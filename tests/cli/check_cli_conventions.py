"""The `mminfer` command line follows shell conventions (issue 16):

- `--json` prints exactly ONE JSON document on stdout (json.loads reads the whole of it) for every
  command that has it; `--jsonl` prints one object per input per line;
- stdout holds the results, stderr the logs (loading, notes, signals);
- the progress bar is drawn on stderr with `--progress`, and when stderr is a terminal; never
  when it is not one unless asked;
- `optimize` quantizes a model with symbolic input shapes without `--shape` (dynamic INT8, and
  static calibration taking its shapes from the calibration samples), and the result matches
  the original on two different input shapes.

usage: check_cli_conventions.py --mminfer BIN --clip CLIP_PIPELINE_DIR --ppocr PPOCR_DIR --work DIR
Standard library and numpy only.
"""
import argparse
import json
import os
import pty
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np

TIMEOUT = 300
failures = []
# Random inputs for the clip folder's text tower at a concrete shape, token ids in its vocabulary.
TEXT_SHAPES = ["--shape", "input_ids=1x5", "--shape", "attention_mask=1x5", "--int-range", "input_ids=0:100",
               "--int-range", "attention_mask=1:2"]


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(cmd, expect=0):
    p = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT)
    # Decoded by hand: text mode would turn the bar's \r into \n.
    p.stdout, p.stderr = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    if expect is not None and p.returncode != expect:
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode} (expected {expect})\nstdout: {p.stdout}\nstderr: {p.stderr}")
    return p


def one_document(name, cmd):
    """The whole of stdout is one JSON document; returns it."""
    p = run(cmd)
    try:
        doc = json.loads(p.stdout)
    except ValueError as e:
        check(False, f"{name} --json: stdout is one JSON document ({e}): {p.stdout[:300]!r}")
        return None
    check(True, f"{name} --json: stdout is one JSON document")
    return doc


def json_lines(name, cmd, count):
    p = run(cmd)
    lines = p.stdout.splitlines()
    try:
        objects = [json.loads(line) for line in lines]
        good = len(objects) == count and all(isinstance(o, dict) for o in objects)
    except ValueError:
        good = False
    check(good, f"{name} --jsonl: {count} lines, one JSON object each (got {len(lines)})")


def npy_inputs(folder, shape, seed):
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    np.save(os.path.join(folder, "input_ids.npy"), rng.integers(0, 100, shape).astype(np.int64))
    np.save(os.path.join(folder, "attention_mask.npy"), np.ones(shape, np.int64))
    return folder


def outputs_of(mminfer, model, inputs, out_dir):
    run([mminfer, "run", model, "--input", "input_ids=" + os.path.join(inputs, "input_ids.npy"),
         "--input", "attention_mask=" + os.path.join(inputs, "attention_mask.npy"), "--output-dir", out_dir])
    return {n[:-4]: np.load(os.path.join(out_dir, n)) for n in os.listdir(out_dir)}


def same_outputs(what, mminfer, original, optimized, work, min_cosine=0.999):
    """Both models on two input shapes: every output's rows within min_cosine."""
    for shape in [(1, 5), (3, 11)]:
        tag = "x".join(map(str, shape))
        inputs = npy_inputs(os.path.join(work, "in_" + tag), shape, seed=sum(shape))
        want = outputs_of(mminfer, original, inputs, os.path.join(work, f"{what}_fp32_{tag}"))
        got = outputs_of(mminfer, optimized, inputs, os.path.join(work, f"{what}_opt_{tag}"))
        worst = 1.0
        for name, w in want.items():
            g = got[name]
            if g.shape != w.shape:
                check(False, f"{what}: {name} shape {g.shape} vs {w.shape} at {tag}")
                return
            g, w = g.reshape(shape[0], -1), w.reshape(shape[0], -1)
            cos = (g * w).sum(1) / (np.linalg.norm(g, axis=1) * np.linalg.norm(w, axis=1))
            worst = min(worst, float(cos.min()))
        check(worst >= min_cosine, f"{what}: outputs at {tag} within cosine {min_cosine} of the original (min {worst:.6f})")


def check_json_documents(a, work):
    images = [os.path.join(a.clip, "reference", "images", n) for n in ("red.png", "stripes.png")]
    text = os.path.join(a.clip, "text.onnx")
    embed = [a.mminfer, "embed", "--pipeline", a.clip, "--threads", "1", "--text", "a cat", "--image", images[0]]
    doc = one_document("embed", embed + ["--json"])
    check(doc is not None and len(doc["results"]) == 2 and len(doc["results"][1]["embedding"]) > 0,
          "embed --json: {\"results\": [...]} with both inputs")
    json_lines("embed", embed + ["--jsonl"], 2)
    bad = run(embed + ["--json", "--jsonl"], expect=1)
    check("not both" in bad.stderr and bad.stdout == "", "embed --json --jsonl: one error line, nothing on stdout")

    classify = [a.mminfer, "classify", "--pipeline", a.clip, "--threads", "1", "--labels", "red,blue",
                "--image", images[0], "--image", images[1]]
    doc = one_document("classify", classify + ["--json"])
    check(doc is not None and [r["file"] for r in doc["results"]] == images, "classify --json: one result per image, in order")
    json_lines("classify", classify + ["--jsonl"], 2)

    ocr = [a.mminfer, "ocr", "--pipeline", a.ppocr, "--threads", "1"] + images
    doc = one_document("ocr", ocr + ["--json"])
    check(doc is not None and len(doc["results"]) == 2 and "lines" in doc["results"][0], "ocr --json: one result per image")
    json_lines("ocr", ocr + ["--jsonl"], 2)

    bench = [a.mminfer, "bench", text, *TEXT_SHAPES, "--runs", "2",
             "--warmup", "1", "--threads", "1"]
    doc = one_document("bench", bench + ["--json"])
    check(doc is not None and doc["runs"] == 2 and doc["median_ms"] > 0, "bench --json: the figures")
    human = run(bench)
    check("median" in human.stdout, "bench without --json: the table on stdout")
    bad_lists = {b: f"got '{b}'" for b in ("0,,2", "0,x", "-1", "0,")}
    bad_lists["0,1,2,3,4,5,6,7,8"] = "at most 8 values"
    for bad_list, why in bad_lists.items():
        bad = run(bench + ["--merge-tokens", bad_list], expect=1)
        check(bad.stdout == "" and why in bad.stderr and len(bad.stderr.splitlines()) == 1,
              f"bench --merge-tokens {bad_list}: one error line ({why}), nothing on stdout")

    doc = one_document("optimize", [a.mminfer, "optimize", text, "-o", os.path.join(work, "json.onnx"), "--json"])
    check(doc is not None and doc["int8"] > 0 and doc["accuracy_measured"] is False, "optimize --json: the summary")

    # Nothing listens on port 1: every request fails, and the report is still one document.
    doc = one_document("loadgen", [a.mminfer, "loadgen", "--url", "http://127.0.0.1:1", "--requests", "2", "--json"])
    check(doc is not None, "loadgen --json against a closed port")


def check_optimize_without_shapes(a, work):
    text = os.path.join(a.clip, "text.onnx")
    dynamic = os.path.join(work, "text_dynamic_int8.onnx")
    p = run([a.mminfer, "optimize", text, "-o", dynamic])
    check("in INT8" in p.stdout and "symbolic" in p.stderr and "symbolic" not in p.stdout,
          "optimize, symbolic shapes, no --shape: summary on stdout, the note on stderr")
    same_outputs("dynamic INT8", a.mminfer, text, dynamic, work)

    # Static calibration: shapes from the samples themselves (two shapes), evaluation on them too.
    calib = os.path.join(work, "calib")
    shutil.rmtree(calib, ignore_errors=True)
    for i, shape in enumerate([(1, 6), (2, 9), (1, 13)]):
        npy_inputs(os.path.join(calib, f"s{i}"), shape, seed=100 + i)
    static = os.path.join(work, "text_qdq.onnx")
    doc = one_document("optimize --calib", [a.mminfer, "optimize", text, "-o", static, "--calib", calib,
                                            "--calib-method", "minmax", "--json"])
    check(doc is not None and doc["accuracy_measured"] is True and doc["form"] == "static QDQ",
          "optimize --calib, symbolic shapes, no --shape: accuracy measured on the calibration samples")
    same_outputs("static QDQ", a.mminfer, text, static, work, min_cosine=0.99)

    # What needs a concrete shape says so, naming itself and the input.
    p = run([a.mminfer, "optimize", text, "-o", os.path.join(work, "x.onnx"), "--min-cosine", "0.99"], expect=1)
    check("--min-cosine" in p.stderr and "'input_ids'" in p.stderr and len(p.stderr.splitlines()) == 1,
          "optimize --min-cosine without shapes: one line naming the flag and the input")
    p = run([a.mminfer, "optimize", text, "-o", os.path.join(work, "x.onnx"), "--shape", "input_ids=1x4"], expect=1)
    check("accuracy check" in p.stderr and "'attention_mask'" in p.stderr,
          "optimize with a shape for one input of two: the error says the accuracy check needs the other")


def check_progress(a, work):
    text = os.path.join(a.clip, "text.onnx")
    bench = [a.mminfer, "bench", text, *TEXT_SHAPES, "--runs", "3",
             "--warmup", "1", "--threads", "1", "--json"]
    p = run(bench + ["--progress"])
    check("timed runs [" in p.stderr and "3/3" in p.stderr and "done in" in p.stderr and "\r" in p.stderr,
          "bench --progress: the bar on stderr")
    try:
        check(json.loads(p.stdout)["runs"] == 3, "bench --progress: stdout still the one document")
    except ValueError:
        check(False, f"bench --progress: stdout still the one document: {p.stdout!r}")
    p = run(bench)
    check(p.stderr == "", "bench, stderr not a terminal: no bar")
    p = run([a.mminfer, "optimize", text, "-o", os.path.join(work, "p.onnx"), *TEXT_SHAPES, "--progress"])
    check("loading text.onnx [" in p.stderr and "accuracy check [" in p.stderr, "optimize --progress: loading and the accuracy check")
    p = run([a.mminfer, "optimize", text, "-o", os.path.join(work, "p.onnx"), *TEXT_SHAPES])
    check(p.stderr == "", "optimize, stderr not a terminal: no bar, no logs")
    p = run([a.mminfer, "optimize", text, "-o", os.path.join(work, "p.onnx"), "--quiet"])
    check(p.stderr == "", "optimize --quiet: nothing on stderr")

    # On a terminal the bar is drawn unasked, and --no-progress silences it.
    for flags, want in (([], True), (["--no-progress"], False)):
        master, slave = pty.openpty()
        proc = subprocess.Popen(bench + flags, stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            seen += chunk
        proc.communicate(timeout=TIMEOUT)
        os.close(master)
        check((b"timed runs [" in seen) == want, f"bench {' '.join(flags)} with stderr a terminal: bar drawn {want}")


def check_serve_logs(a, work):
    repo = os.path.join(work, "repository")
    shutil.rmtree(repo, ignore_errors=True)
    os.makedirs(os.path.join(repo, "broken"))  # neither pipeline.json nor model.onnx
    os.symlink(os.path.abspath(a.clip), os.path.join(repo, "clip"))
    for extra in ([], ["--progress"]):
        proc = subprocess.Popen([a.mminfer, "serve", "--repository", repo, "--port", "0"] + extra,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = [], []
        threads = [threading.Thread(target=lambda s, acc: acc.extend(s), args=(proc.stdout, out), daemon=True),
                   threading.Thread(target=lambda s, acc: acc.extend(s), args=(proc.stderr, err), daemon=True)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 120
        while not any(b"listening on" in line for line in out) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        for t in threads:
            t.join(timeout=10)
        out = [line.decode(errors="replace") for line in out]
        stdout, stderr = "".join(out), b"".join(err).decode(errors="replace")
        tag = "serve " + " ".join(extra)
        check(len(out) == 1 and "listening on http://" in out[0], f"{tag}: stdout holds only where it listens: {stdout!r}")
        if extra:
            check("loading model 'clip' [" in stderr and "2/2" in stderr, f"{tag}: the bar per model on stderr")
        else:
            check("loading model 'broken' (1 of 2)" in stderr and "loading model 'clip' (2 of 2)" in stderr
                  and "\r" not in stderr, f"{tag}: each model said loading on stderr, no bar: {stderr!r}")
        check("model 'broken' is unavailable" in stderr and "SIGTERM" in stderr, f"{tag}: failures and the signal on stderr")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mminfer", required=True)
    ap.add_argument("--clip", required=True)
    ap.add_argument("--ppocr", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    check_json_documents(a, a.work)
    check_optimize_without_shapes(a, a.work)
    check_progress(a, a.work)
    check_serve_logs(a, a.work)
    print(f"{len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
