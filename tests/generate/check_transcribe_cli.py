#!/usr/bin/env python3
"""`mminfer transcribe` on the Whisper-shaped test model against an independent reference: each
window's log-mel from tools/logmel_reference.py (numpy/torch) and ONNX Runtime's present->past
greedy loop on the same ONNX files. A 2.5 s clip spans three 1 s windows of this model; the tokens
of every window, up to and with the end token, must equal ORT's. Also --language, language
detection, a long clip (windows in batches) and bad input.

    check_transcribe_cli.py --mminfer BIN --model DIR --work DIR"""
import json
import os
import shutil
import sys
import wave

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import check_generative_model as cgm  # noqa: E402
import logmel_reference as lr  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import Checks, arguments, mminfer  # noqa: E402

check = Checks()


def write_wav(path, samples, rate=16000):
    pcm = np.clip(np.round(samples * 32767), -32768, 32767).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(rate)
        w.writeframes(pcm.tobytes())


def clip(seconds, seed):
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * 16000)) / 16000.0
    chirp = np.sin(2 * np.pi * (200 + 900 * t) * t)
    return (0.4 * chirp + 0.2 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(t.size)).astype(np.float32)


def read_back(path):
    with wave.open(path, "rb") as w:
        return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float64) / 32768.0


def reference_tokens(runner, model, samples, prompt, pre, eos, new_tokens):
    n = pre["n_samples"]
    filters = lr.mel_filters(pre["feature_size"])
    windows = [samples[i:i + n] for i in range(0, len(samples), n)]
    feats = np.stack([lr.log_mel(np.pad(w, (0, n - len(w))), filters, pad_to_30s=False) for w in windows]).astype(np.float32)
    info = {"num_layers": 2, "heads": 4, "head_dim": 16, "new_tokens": new_tokens}
    ref = {"input_features": feats, "decoder_input_ids": np.array([prompt] * len(windows), np.int64)}
    tokens, _ = cgm.whisper_loop(runner, model, info, ref, layout="split")
    out = []
    for row in tokens.tolist():
        out += row[:row.index(eos) + 1] if eos in row else row
    return out


def transcribe(binary, *args):
    return mminfer(binary, "transcribe", *args)


def main():
    a = arguments()
    pre = json.load(open(os.path.join(a.model, "preprocessor_config.json")))
    gen = json.load(open(os.path.join(a.model, "generation_config.json")))
    eos, start = gen["eos_token_id"], gen["decoder_start_token_id"]
    en, de = gen["lang_to_id"]["<|en|>"], gen["lang_to_id"]["<|de|>"]
    task, nots = gen["task_to_id"]["transcribe"], gen["no_timestamps_token_id"]
    wav = os.path.join(a.work, "clip.wav")
    write_wav(wav, clip(2.5, 1))
    samples = read_back(wav)
    runner = cgm.OrtRunner()
    try:
        for language, lang_id in (("", en), ("de", de)):
            args = ["--pipeline", a.model, wav, "--json", "--threads", "1"] + (["--language", language] if language else [])
            rc, out, err = transcribe(a.mminfer, *args)
            if rc != 0:
                check(False, f"language '{language}': exit {rc}: {err.strip()}")
                continue
            r = json.loads(out)["results"][0]
            want = reference_tokens(runner, a.model, samples, [start, lang_id, task, nots], pre, eos, gen["max_new_tokens"])
            check(r["windows"] == 3, f"language '{language}': 2.5 s is 3 windows of 1 s")
            check(r["tokens"] == want, f"language '{language}': tokens equal ORT's on numpy log-mel ({len(want)} tokens)")
            if language == "":
                # Only decoder_model_merged.onnx: its If on use_cache_branch fixed each way.
                merged = os.path.join(a.work, "merged-only")
                shutil.rmtree(merged, ignore_errors=True)
                shutil.copytree(a.model, merged, ignore=shutil.ignore_patterns("decoder_model.onnx", "decoder_with_past_model.onnx"))
                rc, out, err = transcribe(a.mminfer, "--pipeline", merged, wav, "--json")
                got = json.loads(out)["results"][0]["tokens"] if rc == 0 else err.strip()
                check(got == want, "a merged decoder alone gives the same tokens")

        # Without a forced language, the first step's likeliest language token is used.
        free = os.path.join(a.work, "no-forced-language")
        shutil.rmtree(free, ignore_errors=True)
        shutil.copytree(a.model, free)
        g = dict(gen)
        g.pop("forced_decoder_ids")
        json.dump(g, open(os.path.join(free, "generation_config.json"), "w"))
        filters = lr.mel_filters(pre["feature_size"])
        first = samples[:pre["n_samples"]]
        feats = lr.log_mel(first, filters, pad_to_30s=False)[None].astype(np.float32)
        hidden = runner.run(os.path.join(a.model, "encoder_model.onnx"), {"input_features": feats})["last_hidden_state"]
        logits = runner.run(os.path.join(a.model, "decoder_model.onnx"),
                            {"input_ids": np.array([[start]], np.int64), "encoder_hidden_states": hidden})["logits"][0, -1]
        expect = "<|en|>" if logits[en] > logits[de] else "<|de|>"
        rc, out, err = transcribe(a.mminfer, "--pipeline", free, wav, "--json")
        r = json.loads(out)["results"][0] if rc == 0 else {}
        check(r.get("language") == expect, f"language detected as ORT's first step prefers ({expect})")
    finally:
        runner.close()

    # A long clip: 20 windows, decoded 8 at a time.
    long_wav = os.path.join(a.work, "long.wav")
    write_wav(long_wav, clip(19.5, 2))
    rc, out, err = transcribe(a.mminfer, "--pipeline", a.model, long_wav, "--json", "--max-new-tokens", "8")
    r = json.loads(out)["results"][0] if rc == 0 else {}
    check(r.get("windows") == 20 and len(r.get("tokens", [])) <= 20 * 8, f"19.5 s in 20 windows: {err.strip()[:200]}")

    # Bad input: one line each; the good file beside a bad one still transcribes.
    # The same 1 s window three times: encoded once with the feature cache, the same tokens without.
    repeated = os.path.join(a.work, "repeated.wav")
    write_wav(repeated, np.tile(samples[:16000], 3))
    runs = [transcribe(a.mminfer, "--pipeline", a.model, repeated, "--json", "--feature-cache-mb", mb) for mb in ("256", "0")]
    got = [json.loads(out)["results"][0] if rc == 0 else {} for rc, out, _ in runs]
    check(got[0].get("encoder_runs") == 1 and got[1].get("encoder_runs") == 3 and got[0].get("tokens") == got[1].get("tokens"),
          f"a repeated window is encoded once: encoder_runs {[g.get('encoder_runs') for g in got]}, the same tokens")

    empty = os.path.join(a.work, "empty.wav")
    write_wav(empty, np.zeros(0, np.float32))
    junk = os.path.join(a.work, "junk.wav")
    open(junk, "wb").write(b"RIFF....not audio at all")
    rc, out, err = transcribe(a.mminfer, "--pipeline", a.model, empty, junk, wav)
    lines = err.strip().splitlines()
    check(rc == 1 and len(lines) == 2 and "empty.wav" in lines[0] and "junk.wav" in lines[1] and out.count("\n") == 1,
          f"empty and junk files: one error line each, the good one transcribed: {err.strip()[:300]}")
    for args, text in [(["--language", "xx"], "unknown language 'xx'"), (["--task", "sing"], "--task must be"),
                       (["--max-new-tokens", "-3"], "--max-new-tokens must be at least 1")]:
        rc, out, err = transcribe(a.mminfer, "--pipeline", a.model, wav, *args)
        check(rc == 1 and text in err and len(err.strip().splitlines()) == 1, f"error '{text}': {err.strip()[:200]}")
    rc, out, err = transcribe(a.mminfer, "--pipeline", os.path.join(a.work, "absent"), wav)
    check(rc == 1 and "not a folder" in err, "missing folder")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
