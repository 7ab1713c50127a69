#!/usr/bin/env python3
"""`mminfer transcribe --timestamps` on the Whisper-shaped test model against torch: for each clip
tools/make_generative_models.py transcribed with Whisper's timestamp rules and sequential seeking
(reference.json's timestamp_cases: 2.5 s and 0.4 s of chirps, 1.5 s of silence, 31.3 s; the test
model's window is 1 s), the windows decoded, their starts (the seek after each window's last
segment boundary), every window's tokens, the segments (start, end, text, tokens) and the text
must equal torch's, and the text output must print the same segments. Random weights make the
timestamps arbitrary but deterministic, so equal tokens mean the rules were applied as torch
applied them. Also beam search with the rules and the same seeking (tools/generate_reference.py's
beam search on ONNX Runtime's whole-sequence logits) and bad input.

    check_transcribe_timestamps_cli.py --mminfer BIN --model DIR --work DIR"""
import json
import os
import shutil
import sys

import numpy as np

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
sys.path.insert(0, TOOLS)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_generative_model as cgm  # noqa: E402
import generate_reference as gr  # noqa: E402
import logmel_reference as lr  # noqa: E402
import whisper_timestamps as wt  # noqa: E402
from cli_checks import Checks, arguments, mminfer  # noqa: E402

check = Checks()


def same_segments(got, want):
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        # Times within rounding: the C++ side may fuse the multiply-add of start + index * 0.02.
        if abs(g["start"] - w["start"]) > 1e-9 or abs(g["end"] - w["end"]) > 1e-9:
            return False
        if g["tokens"] != w["tokens"] or g["text"] != w["text"]:
            return False
    return True


def check_cases(a, ref):
    cases = ref["timestamp_cases"]
    clips = [os.path.join(a.model, "reference", c["clip"]) for c in cases]
    rc, out, err = mminfer(a.mminfer, "transcribe", "--pipeline", a.model, *clips, "--timestamps", "--json")
    results = json.loads(out)["results"] if rc == 0 else []
    check(len(results) == len(cases), f"--timestamps --json on {len(cases)} clips: {err.strip()[:200]}")
    window = json.load(open(os.path.join(a.model, "preprocessor_config.json")))["n_samples"]
    mid_window = 0
    for c, r in zip(cases, results):
        name = c["clip"]
        want = [t for w in c["window_tokens"] for t in w]
        seeks = c["window_seeks"]
        print(f"{name}: {len(seeks)} windows from samples {seeks}")
        mid_window += sum((b - a) % window != 0 for a, b in zip(seeks, seeks[1:]))
        check(r["windows"] == len(c["window_tokens"]), f"{name}: {r['windows']} windows, as torch decoded")
        check(r.get("window_starts") == c["window_starts"], f"{name}: the windows start where torch's seek put them")
        check(r.get("window_tokens") == c["window_tokens"], f"{name}: every window's tokens equal torch's")
        check(r["tokens"] == want, f"{name}: tokens equal torch's ({len(want)}: {c['timestamp_tokens']} timestamps, "
              f"{c['text_tokens']} text)")
        check(same_segments(r.get("segments", []), c["segments"]), f"{name}: {len(c['segments'])} segments equal torch's")
        check(r["text"] == c["text"], f"{name}: the text leaves the timestamps out and equals torch's")
    check(mid_window > 0, f"{mid_window} windows start mid-window (at a segment boundary of the one before)")
    long_case = max(cases, key=lambda c: c["seconds"])
    check(long_case["seconds"] > 30 and any(s["start"] >= 30 for s in long_case["segments"]),
          f"{long_case['clip']}: segments past 30 s carry their window's offset")

    # The text output: FILE: then one line per segment.
    rc, out, err = mminfer(a.mminfer, "transcribe", "--pipeline", a.model, clips[0], "--timestamps")
    lines = out.splitlines()
    segs = cases[0]["segments"]
    want_bounds = [f"[{wt.format_time(s['start'])} --> {wt.format_time(s['end'])}]" for s in segs]
    check(rc == 0 and lines[0] == f"{clips[0]}:" and [ln.split("]")[0] + "]" for ln in lines[1:]] == want_bounds,
          f"text output: {len(segs)} lines like {lines[1] if len(lines) > 1 else err.strip()[:100]!r}")
    plain = [ln for ln, s in zip(lines[1:], segs) if s["text"].strip().isprintable()]
    check(all(ln.endswith("] " + s["text"].lstrip(" ")) for ln, s in zip(lines[1:], segs) if ln in plain),
          f"text output: segment texts after the bounds ({len(plain)} printable)")
    # Without --timestamps (check_transcribe_cli.py checks those tokens) there are no segments.
    rc, out, err = mminfer(a.mminfer, "transcribe", "--pipeline", a.model, clips[0], "--json")
    r = json.loads(out)["results"][0] if rc == 0 else {}
    check(rc == 0 and "segments" not in r, "without --timestamps: no segments")


def check_beam(a, gen, ref):
    """Beam search with the rules on the 2.5 s clip, window after window as torch seeks."""
    pre = json.load(open(os.path.join(a.model, "preprocessor_config.json")))
    window, rate = pre["n_samples"], pre["sampling_rate"]
    clip = os.path.join(a.model, "reference", "speech-2.5s.wav")
    samples, _ = lr.read_wav16(clip)
    prompt = ref["timestamp_cases"][0]["prompt_ids"]
    vocab = json.load(open(os.path.join(a.model, "config.json")))["vocab_size"]
    begin, eot = ref["timestamp_begin"], gen["eos_token_id"]
    rules = dict(eot=eot, no_timestamps=gen["no_timestamps_token_id"], timestamp_begin=begin,
                 max_initial_index=gen["max_initial_timestamp_index"])
    new = 20
    runner = cgm.OrtRunner()
    try:
        def beam_window(padded):
            feats = lr.log_mel(padded, lr.mel_filters(pre["feature_size"]), pad_to_30s=False)[None].astype(np.float32)
            hidden = runner.run(os.path.join(a.model, "encoder_model.onnx"), {"input_features": feats})["last_hidden_state"]

            def whisper_logits(seqs):
                ids = np.array(seqs, np.int64)
                out = runner.run(os.path.join(a.model, "decoder_model.onnx"),
                                 {"input_ids": ids, "encoder_hidden_states": np.repeat(hidden, ids.shape[0], axis=0)})
                return out["logits"][:, -1, :]

            case = dict(vocab=vocab, num_beams=3, eos_token_id=[eot], pad_token_id=gen["pad_token_id"],
                        prompts=[prompt], max_length=len(prompt) + new, length_penalty=1.0, early_stopping=False,
                        num_return_sequences=1, config={"timestamps": rules})
            _, results = gr.beam_search(case, whisper_logits)
            return results[0][0]["tokens"][len(prompt):]

        windows, segments, _ = wt.transcribe_seeking(samples, window, rate, beam_window, begin, eot, lambda ids: "")
    finally:
        runner.close()
    rc, out, err = mminfer(a.mminfer, "transcribe", "--pipeline", a.model, clip, "--timestamps", "--beam", "3",
                           "--max-new-tokens", str(new), "--json")
    r = json.loads(out)["results"][0] if rc == 0 else {}
    seeks = [w["seek"] for w in windows]
    print(f"--beam 3: {len(seeks)} windows from samples {seeks}")
    want = [w["tokens"] for w in windows]
    stamps = sum(t >= begin for w in want for t in w)
    check(r.get("window_tokens") == want, f"--timestamps --beam 3: {len(want)} windows' tokens, {stamps} timestamps, "
          f"equal the reference's: {err.strip()[:200]}")
    check(r.get("window_starts") == [w["start"] for w in windows], "--timestamps --beam 3: the windows start where "
          "the reference's seek put them")
    got = [(s["start"], s["end"], s["tokens"]) for s in r.get("segments", [])]
    check(len(got) == len(segments) and all(abs(g[0] - s["start"]) < 1e-9 and abs(g[1] - s["end"]) < 1e-9 and
                                            g[2] == s["tokens"] for g, s in zip(got, segments)),
          f"--timestamps --beam 3: {len(segments)} segments equal the reference's")


def check_bad_input(a):
    # A folder whose tokenizer.json has no timestamp tokens (reserved fillers in their places):
    # one line, before any file.
    bare = os.path.join(a.work, "no-timestamp-tokens")
    shutil.rmtree(bare, ignore_errors=True)
    shutil.copytree(a.model, bare, ignore=shutil.ignore_patterns("reference"))
    tok = json.load(open(os.path.join(bare, "tokenizer.json")))
    for t in tok["added_tokens"]:
        if t["content"].startswith("<|") and t["content"][2:3].isdigit():
            t["content"] = f"<|reserved_{t['id']}|>"
    json.dump(tok, open(os.path.join(bare, "tokenizer.json"), "w"))
    clip = os.path.join(a.model, "reference", "speech-0.4s.wav")
    rc, out, err = mminfer(a.mminfer, "transcribe", "--pipeline", bare, clip, clip, "--timestamps")
    lines = err.strip().splitlines()
    check(rc == 1 and len(lines) == 1 and "has no timestamp tokens" in lines[0] and out == "",
          f"--timestamps without timestamp tokens: one line: {err.strip()[:200]}")
    rc, out, err = mminfer(a.mminfer, "transcribe", "--pipeline", bare, clip, "--json")
    check(rc == 0, "the same folder still transcribes without --timestamps")
    # A bad max_initial_timestamp_index in generation_config.json.
    gen = json.load(open(os.path.join(a.model, "generation_config.json")))
    shutil.copy(os.path.join(a.model, "tokenizer.json"), os.path.join(bare, "tokenizer.json"))
    json.dump(dict(gen, max_initial_timestamp_index="soon"), open(os.path.join(bare, "generation_config.json"), "w"))
    rc, out, err = mminfer(a.mminfer, "transcribe", "--pipeline", bare, clip, "--timestamps")
    check(rc == 1 and "max_initial_timestamp_index must be" in err and len(err.strip().splitlines()) == 1,
          f"bad max_initial_timestamp_index: {err.strip()[:200]}")


def main():
    a = arguments()
    ref = json.load(open(os.path.join(a.model, "reference", "reference.json")))
    gen = json.load(open(os.path.join(a.model, "generation_config.json")))
    tok = json.load(open(os.path.join(a.model, "tokenizer.json")))
    ids = {t["content"]: t["id"] for t in tok["added_tokens"]}
    ref["timestamp_begin"] = ids["<|0.00|>"]
    check(ids["<|0.00|>"] == gen["no_timestamps_token_id"] + 1 and ids["<|30.00|>"] == ids["<|0.00|>"] + 1500,
          "the test model's tokenizer has Whisper's timestamp layout")
    check_cases(a, ref)
    check_beam(a, gen, ref)
    check_bad_input(a)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
