#!/usr/bin/env python3
"""`mminfer generate` on the generative test models: the tokens of every reference case equal
torch's (prompts given as ids and as text), --json carries the documented fields, sampling is
reproducible by seed and moves with it, the decoding cascade gives the model's or its INT4
copy's tokens at its extreme bounds, and bad input gets one clear error line.

    check_generate_cli.py --mminfer BIN --models DIR --work DIR"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import Checks, arguments, mminfer  # noqa: E402

check = Checks()
TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")


def run(binary, *args):
    return mminfer(binary, "generate", *args)


def main():
    a = arguments("--models")
    llama = os.path.join(a.models, "llama-tiny")
    ref = json.load(open(os.path.join(llama, "reference", "reference.json")))

    for case in ref["cases"]:
        args = ["--pipeline", llama, "--max-new-tokens", str(ref["new_tokens"]), "--json", "--threads", "1"]
        for ids in case["prompt_ids"]:
            args += ["--prompt-ids", ",".join(map(str, ids))]
        rc, out, err = run(a.mminfer, *args)
        if rc != 0:
            check(False, f"{case['case']}: exit {rc}: {err.strip()}")
            continue
        results = json.loads(out)["results"]
        check([r["tokens"] for r in results] == case["tokens"], f"{case['case']}: greedy tokens equal torch's")
        fields = {"prompt", "text", "tokens", "stop_reason", "prompt_tokens", "prefill_ms", "decode_ms_per_token", "tokens_per_s"}
        check(all(fields <= set(r) for r in results), f"{case['case']}: --json fields")

    # The decoding cascade: bound 0, the model's own tokens; a bound no entropy reaches, its INT4
    # copy's; the speculative and cascade flags refuse each other.
    case = ref["cases"][0]
    base = ["--pipeline", llama, "--max-new-tokens", "16", "--json", "--threads", "1"]
    for ids in case["prompt_ids"]:
        base += ["--prompt-ids", ",".join(map(str, ids))]
    rc, out, err = run(a.mminfer, *base, "--precision", "text=int4")
    int4 = [r["tokens"] for r in json.loads(out)["results"]] if rc == 0 else err
    for bound, want, name in (("0", [t[:16] for t in case["tokens"]], "the model's"), ("1e9", int4, "its INT4 copy's")):
        rc, out, err = run(a.mminfer, *base, "--cascade", bound)
        results = json.loads(out)["results"] if rc == 0 else []
        check([r["tokens"] for r in results] == want, f"generate --cascade {bound}: {name} tokens {err.strip()[:200]}")
        c = results[0].get("cascade", {}) if results else {}
        made = sum(len(r["tokens"]) for r in results)
        check(c.get("tokens") == made and c.get("escalated") == (made if bound == "0" else 0), f"generate --cascade {bound}: counts {c}")
    rc, out, err = run(a.mminfer, *base, "--cascade", "1", "--speculate", "2")
    check(rc != 0 and "do not mix" in err, f"--cascade with --speculate refused: {err.strip()[:200]}")

    # onnxruntime-genai's form (GroupQueryAttention appending in place): FP32 makes torch's tokens,
    # INT4 (MatMulNBits) the tokens of ONNX Runtime's own present->past loop on the same file.
    for name in ("llama-tiny-contrib-fp32", "llama-tiny-contrib-int4-acc0"):
        folder = os.path.join(a.models, name)
        if not os.path.isdir(folder):
            check(False, f"{name} is missing (the generative_models_contrib fixture makes it)")
            continue
        info = json.load(open(os.path.join(folder, "reference", "reference.json")))
        for case in info["cases"]:
            args = ["--pipeline", folder, "--max-new-tokens", str(info["new_tokens"]), "--json"]
            for ids in case["prompt_ids"]:
                args += ["--prompt-ids", ",".join(map(str, ids))]
            rc, out, err = run(a.mminfer, *args)
            got = [r["tokens"] for r in json.loads(out)["results"]] if rc == 0 else err.strip()
            if info["precision"] == "fp32":
                want = case["tokens"]
            else:
                import numpy as np
                sys.path.insert(0, TOOLS)
                import check_contrib_llama as ccl
                import check_generative_model as cgm
                arrays = {k: np.load(os.path.join(folder, "reference", v)) for k, v in case["files"].items()}
                runner = cgm.OrtRunner()
                try:
                    pad = json.load(open(os.path.join(folder, "generation_config.json")))["pad_token_id"]
                    want = ccl.contrib_loop(runner, folder, info, arrays, pad)[0].tolist()
                finally:
                    runner.close()
            check(got == want, f"{name} {case['case']}: tokens equal {'torch' if info['precision'] == 'fp32' else 'ORT'}'s")

    # `optimize --quantize int4` on the Optimum-form decoder: mminfer's cached loop makes the tokens of
    # ONNX Runtime's present->past loop on the file mminfer wrote. With FP32 activations
    # (--accuracy-level 0) every token; with the default int8 activations (level 4) the first 16:
    # there, later on this random model, an activation within float rounding of an int8 rounding
    # boundary can round apart in the two runtimes and tip a near-tied greedy choice.
    import numpy as np
    sys.path.insert(0, TOOLS)
    import check_generative_model as cgm
    case = ref["cases"][1]
    arrays = {k: np.load(os.path.join(llama, "reference", v)) for k, v in case["files"].items()}
    for level, steps in (("0", ref["new_tokens"]), ("4", 16)):
        int4 = os.path.join(a.work, "llama-tiny-int4-level" + level)
        shutil.rmtree(int4, ignore_errors=True)
        shutil.copytree(llama, int4, ignore=shutil.ignore_patterns("model.onnx"))
        q = subprocess.run([a.mminfer, "optimize", os.path.join(llama, "model.onnx"), "-o", os.path.join(int4, "model.onnx"),
                            "--quantize", "int4", "--accuracy-level", level], capture_output=True, text=True)
        check(q.returncode == 0 and f"accuracy_level {level}" in q.stdout,
              f"optimize --quantize int4 --accuracy-level {level}: {(q.stderr or q.stdout).strip()[:200]}")
        runner = cgm.OrtRunner()
        try:
            want = [list(map(int, row))[:steps] for row in cgm.llama_loop(runner, int4, ref, arrays)[0]]
        finally:
            runner.close()
        args = ["--pipeline", int4, "--max-new-tokens", str(ref["new_tokens"]), "--json"]
        for ids in case["prompt_ids"]:
            args += ["--prompt-ids", ",".join(map(str, ids))]
        rc, out, err = run(a.mminfer, *args)
        got = [r["tokens"][:steps] for r in json.loads(out)["results"]] if rc == 0 else err.strip()
        check(got == want, f"INT4 file (accuracy_level {level}) written by optimize: {steps} tokens equal ONNX Runtime's on it")

    # float16 and int8 KV caches (int8: codes and a scale per position and KV head): torch's greedy
    # tokens on the first reference case's first 16 steps (the random model's logit margins are far
    # wider than the caches' rounding there), in the Optimum form and in onnxruntime-genai's
    # GroupQueryAttention form, whose cache is bound in place.
    case = ref["cases"][0]
    for folder in (llama, os.path.join(a.models, "llama-tiny-contrib-fp32")):
        for cache in ("fp16", "int8"):
            rc, out, err = run(a.mminfer, "--pipeline", folder, "--prompt-ids", ",".join(map(str, case["prompt_ids"][0])),
                               "--max-new-tokens", "16", "--kv-cache", cache, "--json")
            got = json.loads(out)["results"][0]["tokens"] if rc == 0 else err.strip()
            check(got == case["tokens"][0][:16], f"{cache} KV cache, {os.path.basename(folder)}: torch's first 16 tokens")

    # Text prompts go through tokenizer.json: the same ids as torch's tokenizer made.
    case = ref["cases"][0]
    rc, out, err = run(a.mminfer, "--pipeline", llama, case["prompts"][0], "--max-new-tokens", "8", "--json")
    r = json.loads(out)["results"][0] if rc == 0 else {}
    check(r.get("tokens") == case["tokens"][0][:8] and r.get("prompt_tokens") == len(case["prompt_ids"][0]),
          "text prompt tokenized as torch's reference")
    # Streaming: the text printed as it comes is the text of the tokens.
    rc, out, err = run(a.mminfer, "--pipeline", llama, case["prompts"][0], "--max-new-tokens", "8")
    check(rc == 0 and out.endswith("\n") and "tokens/s" in err, "streams text, timings on stderr")

    # Sampling: same seed, same tokens; another seed, other tokens.
    def sample(seed):
        rc, out, err = run(a.mminfer, "--pipeline", llama, "Hello", "--temperature", "1.5", "--top-p", "0.95",
                           "--seed", str(seed), "--max-new-tokens", "24", "--json")
        return json.loads(out)["results"][0]["tokens"] if rc == 0 else err
    s1, s2, s3 = sample(7), sample(7), sample(8)
    check(isinstance(s1, list) and s1 == s2, "sampling reproducible by seed")
    check(s1 != s3, "another seed samples other tokens")

    # bench --pipeline: prefill and decode timed apart (figures only checked to be there).
    p = subprocess.run([a.mminfer, "bench", "--pipeline", llama, "--runs", "2", "--prompt-tokens", "8", "--new-tokens", "4",
                        "--json"], capture_output=True, text=True, timeout=300)
    doc = json.loads(p.stdout) if p.returncode == 0 else {}
    check(doc.get("prefill_ms", 0) > 0 and doc.get("decode_ms_per_token", 0) > 0 and doc.get("kv_cache_bytes", 0) > 0,
          f"bench --pipeline: {p.stderr.strip()[:200]}")
    p = subprocess.run([a.mminfer, "bench", "--pipeline", llama, "--prompt-tokens", "250", "--new-tokens", "10"],
                       capture_output=True, text=True)
    check(p.returncode == 1 and "more than the model's context of 256" in p.stderr, "bench --pipeline past the context")

    # Bad input: one line, exit 1 (2 for usage), never a crash.
    os.makedirs(a.work, exist_ok=True)
    broken = os.path.join(a.work, "no-tokenizer")
    shutil.rmtree(broken, ignore_errors=True)
    shutil.copytree(llama, broken)
    os.remove(os.path.join(broken, "tokenizer.json"))
    mismatched = os.path.join(a.work, "small-vocab")
    shutil.rmtree(mismatched, ignore_errors=True)
    shutil.copytree(llama, mismatched)
    config = json.load(open(os.path.join(llama, "config.json")))
    config["vocab_size"] = 100
    json.dump(config, open(os.path.join(mismatched, "config.json"), "w"))
    unbounded = os.path.join(a.work, "no-context")
    shutil.rmtree(unbounded, ignore_errors=True)
    shutil.copytree(llama, unbounded)
    config = json.load(open(os.path.join(llama, "config.json")))
    config.pop("max_position_embeddings")
    json.dump(config, open(os.path.join(unbounded, "config.json"), "w"))
    # --chat: the prompt is the folder's chat template around the user's message, without the
    # tokenizer's special tokens; the same tokens as that text given plainly.
    chat = os.path.join(a.work, "chat-template")
    shutil.rmtree(chat, ignore_errors=True)
    shutil.copytree(llama, chat)
    tok = json.load(open(os.path.join(llama, "tokenizer_config.json")))
    tok["chat_template"] = ("{% for m in messages %}{{ m.role | upper }}: {{ m.content | trim }}\n{% endfor %}"
                            "{% if add_generation_prompt %}ASSISTANT:{% endif %}")
    json.dump(tok, open(os.path.join(chat, "tokenizer_config.json"), "w"))
    rc, out, err = run(a.mminfer, "--pipeline", chat, "--chat", " hello there ", "--max-new-tokens", "6", "--json")
    plain_rc, plain, _ = run(a.mminfer, "--pipeline", chat, "USER: hello there\nASSISTANT:", "--max-new-tokens", "6", "--json")
    got = json.loads(out)["results"][0] if rc == 0 else {}
    want = json.loads(plain)["results"][0] if plain_rc == 0 else {"tokens": None}
    check(got.get("tokens") == want["tokens"] and got.get("prompt_tokens") == want.get("prompt_tokens"),
          f"--chat renders the folder's template: {err.strip()[:200]}")
    bad = [
        (["--pipeline", llama, "--chat", "hi"], 1, "--chat needs a chat template"),
        (["--pipeline", unbounded, "hi", "--max-new-tokens", "1000000000"], 1, "GiB limit: ask for fewer new tokens"),
        (["--pipeline", mismatched, "hi"], 1, "the tokenizer does not belong to this model"),
        (["--pipeline", os.path.join(a.work, "absent"), "hi"], 1, "not a folder"),
        (["--pipeline", broken, "hi"], 1, "tokenizer.json is missing"),
        (["--pipeline", llama, "--prompt-ids", "1," + ",".join(["5"] * 300)], 1, "the model's context is 256 positions"),
        (["--pipeline", llama, "hi", "--max-new-tokens", "0"], 1, "--max-new-tokens must be at least 1"),
        (["--pipeline", llama, "hi", "--top-p", "0"], 1, "--top-p must be in (0, 1]"),
        (["--pipeline", llama, "--prompt-ids", "1,x"], 1, "'x' is not a token id"),
        (["--pipeline", llama, "--prompt-ids", "1,100000"], 1, "token id 100000"),
        (["--pipeline", llama, "hi", "--kv-cache", "int3"], 1, "--kv-cache must be fp32, fp16 or int8, got 'int3'"),
        (["--pipeline", llama, "hi", "--kv-cache", "INT8"], 1, "--kv-cache must be fp32, fp16 or int8, got 'INT8'"),
        (["--pipeline", llama, "hi", "--kv-cache", ""], 1, "--kv-cache must be fp32, fp16 or int8, got ''"),
        (["--pipeline", os.path.join(a.models, "whisper-tiny-test"), "hi"], 1,
         "holds a speech-to-text model (config.json model_type 'whisper'): use mminfer transcribe"),
        (["--pipeline", llama], 2, "usage: mminfer generate"),
    ]
    for args, code, text in bad:
        rc, out, err = run(a.mminfer, *args)
        lines = err.strip().splitlines()
        check(rc == code and text in err and (code == 2 or len(lines) == 1), f"error '{text}': exit {rc}: {err.strip()[:200]}")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
