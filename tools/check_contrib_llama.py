#!/usr/bin/env python3
"""Runs the naive generation loop on folders from tools/export_contrib_llama.py (the
onnxruntime-genai model builder's form) through ONNX Runtime and mminfer's Python module, each
step's present.* fed back as past_key_values.*:

    check_contrib_llama.py FOLDER... [--engine mminfer|ort]... [--rtol 1e-4] [--int4-rtol 1e-2]
                           [--kv-buffer growing|max]

  fp32 folders  each engine against torch's reference: greedy tokens equal, each step's logits
                within --rtol relative (max |engine - torch| <= rtol * max |torch| per step)
  int4 folders  the engines against each other: greedy tokens equal and each step's logits
                within --int4-rtol relative; how many tokens still match torch's FP32 choice is
                printed, not checked (the weights are quantized). With accuracy_level 4 (int8
                activations per block, as ONNX Runtime computes it) an activation within float
                rounding of a rounding boundary lands one int8 code apart in the two engines and
                that step and some after it differ more: there the median step is held to
                --int4-rtol (the maximum is printed)

--kv-buffer growing (the default) starts from zero-length pasts and each present is one longer;
max feeds pasts as long as genai_config.json's search.max_length, as onnxruntime-genai does with
past_present_share_buffer (present then has that length too, the new rows written in place).

Prompts of different lengths are right-padded, as GroupQueryAttention needs (each row's keys
start at position 0 and seqlens_k says where they end); the first step's logits are each row's
last real token's. Exit status 0 when every check passes."""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from check_generative_model import MminferRunner, OrtRunner, op_types  # noqa: E402


def right_padded(ids, mask, pad):
    """The reference's left-padded prompts moved to the start of each row."""
    out_ids, out_mask = np.full_like(ids, pad), np.zeros_like(mask)
    for row in range(ids.shape[0]):
        real = ids[row][mask[row] == 1]
        out_ids[row, :len(real)], out_mask[row, :len(real)] = real, 1
    return out_ids, out_mask


def contrib_loop(runner, folder, info, ref, pad, kv_length=0):
    model = os.path.join(folder, "model.onnx")
    ids, mask = right_padded(ref["input_ids"], ref["attention_mask"], pad)
    b, lengths = ids.shape[0], mask.sum(axis=1)
    past = {f"past_key_values.{i}.{kind}": np.zeros((b, info["kv_heads"], kv_length, info["head_dim"]), np.float32)
            for i in range(info["num_layers"]) for kind in ("key", "value")}
    tokens, logits = [], []
    for step in range(info["new_tokens"]):
        out = runner.run(model, dict(input_ids=ids, attention_mask=mask, **past))
        last = out["logits"][np.arange(b), lengths - 1 if step == 0 else -1, :]
        nxt = last.argmax(-1).astype(np.int64)[:, None]
        tokens.append(nxt)
        logits.append(last)
        ids = nxt
        mask = np.concatenate([mask, np.ones((b, 1), np.int64)], axis=1)
        past = {k: out[k.replace("past_key_values", "present")] for k in past}
    return np.concatenate(tokens, axis=1), np.stack(logits)


def step_errors(got, want):
    """Per step: max |got - want| / max |want|."""
    return np.array([float(np.abs(got[s] - want[s]).max()) / float(np.abs(want[s]).max()) for s in range(want.shape[0])])


def relative_error(got, want):
    return float(step_errors(got, want).max())


def first_difference(a, b):
    diff = np.argwhere((a != b).any(axis=0))
    return None if len(diff) == 0 else int(diff[0][0])


def report(ok, label, same, first, err, limit, extra="", which="max"):
    detail = "tokens equal" if same else f"tokens differ from step {first}"
    print(f"{'PASS' if ok else 'FAIL'} {label}: {detail}, {which} relative logit error {err:.2e} (limit {limit:.0e}){extra}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--engine", action="append", choices=["mminfer", "ort"])
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--int4-rtol", type=float, default=1e-2)
    ap.add_argument("--kv-buffer", choices=["growing", "max"], default="growing")
    args = ap.parse_args()
    engines = args.engine or ["ort", "mminfer"]
    infos = {}
    for folder in args.folders:
        path = os.path.join(folder, "reference", "reference.json")
        if not os.path.isfile(path):
            sys.exit(f"check_contrib_llama.py: error: {path} is missing (make the folder with tools/export_contrib_llama.py)")
        with open(path) as f:
            infos[folder] = json.load(f)
        if infos[folder].get("kind") != "decoder-only-contrib":
            sys.exit(f"check_contrib_llama.py: error: {folder} is not a folder of tools/export_contrib_llama.py")
        if infos[folder]["precision"] == "int4" and set(engines) != {"ort", "mminfer"}:
            sys.exit("check_contrib_llama.py: error: int4 folders compare the engines: give both or no --engine")
    failures = 0
    runners = {}
    try:
        for folder in args.folders:
            info = infos[folder]
            with open(os.path.join(folder, "generation_config.json")) as f:
                pad = json.load(f)["pad_token_id"]
            kv_length = 0
            if args.kv_buffer == "max":
                with open(os.path.join(folder, "genai_config.json")) as f:
                    kv_length = json.load(f)["search"]["max_length"]
            for case in info["cases"]:
                ref = {k: np.load(os.path.join(folder, "reference", v)) for k, v in case["files"].items()}
                results = {}
                for engine in engines:
                    runner = runners.setdefault(engine, {"mminfer": MminferRunner, "ort": OrtRunner}[engine]())
                    try:
                        results[engine] = contrib_loop(runner, folder, info, ref, pad, kv_length)
                    except Exception as e:  # the engine refused: say what it said and what the model uses
                        failures += 1
                        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                        print(f"FAIL {engine} {info['model']} {case['case']}: {msg}")
                        print(f"     op types: {', '.join(op_types(folder))}")
                b = ref["tokens"].shape[0]
                shape = f"(batch {b}, {info['new_tokens']} new tokens{', max-length KV buffers' if kv_length else ''})"
                if info["precision"] == "fp32":
                    for engine, (tokens, logits) in results.items():
                        same, err = np.array_equal(tokens, ref["tokens"]), relative_error(logits, ref["logits"])
                        failures += not report(same and err <= args.rtol, f"{engine} {info['model']} {case['case']} {shape}",
                                               same, first_difference(tokens, ref["tokens"]), err, args.rtol)
                elif len(results) == 2:
                    (t_ort, l_ort), (t_mm, l_mm) = results["ort"], results["mminfer"]
                    same, errs = np.array_equal(t_ort, t_mm), step_errors(l_mm, l_ort)
                    vs_torch = int((t_ort == ref["tokens"]).sum())
                    above = int((errs > args.int4_rtol).sum())
                    if info.get("accuracy_level") == 4:
                        ok = same and float(np.median(errs)) <= args.int4_rtol
                        extra = f"; {above}/{len(errs)} steps above the limit, max {errs.max():.1e} (int8 rounding flips)"
                    else:
                        ok, extra = same and above == 0, ""
                    failures += not report(ok, f"mminfer vs ort {info['model']} {case['case']} {shape}",
                                           same, first_difference(t_ort, t_mm), float(np.median(errs)) if extra else errs.max(),
                                           args.int4_rtol, extra + f"; {vs_torch}/{t_ort.size} tokens equal torch's FP32",
                                           "median" if extra else "max")
    finally:
        for runner in runners.values():
            runner.close()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
