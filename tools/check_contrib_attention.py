#!/usr/bin/python3
"""Checks mminfer's com.microsoft GroupQueryAttention and MultiHeadAttention against ONNX Runtime
(onnxruntime-node through tools/ort_run_many.js) on small models this script writes.

  check_contrib_attention.py --mminfer BIN [--node node] [--work DIR] [--rtol 1e-5]

Each case is a one-node model run by both engines on the same inputs: a prompt of 5 tokens
(batch 2, right-padded per sequence through seqlens_k), then a decode step of 1 that each engine
feeds with its own presents from the prompt. GQA: 4 query heads over 2 and 4 KV heads, head size
8 and 16, a past that grows and a max-length past (present shares its shape), rotary (half and
interleaved), a local window, softcap, a chunked prompt after a cache (batch 1). MHA:
self-attention with bias, with and without past, unidirectional, key_padding_mask,
attention_bias, and cross-attention over 4-D (BNSH) keys.
One GQA case runs in float16 (tolerance 2e-3: a rounding step of fp16).
Compared: every output and present, max|mminfer - ORT| <= rtol * max(1, max|ORT|), over the rows
ONNX Runtime defines (query rows past a padded sequence's end are excluded).
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from output_compare import load_output, run_mminfer, run_tool  # noqa: E402

F32, I32 = TensorProto.FLOAT, TensorProto.INT32


def model(op, inputs, outputs, attrs, path):
    """One com.microsoft node; inputs: [(name, elem_type, shape) or None for an omitted one]."""
    names = [i[0] if i else "" for i in inputs]
    node = helper.make_node(op, names, [o[0] for o in outputs], domain="com.microsoft", **attrs)
    graph = helper.make_graph([node], op.lower(),
                              [helper.make_tensor_value_info(n, t, s) for (n, t, s) in (i for i in inputs if i)],
                              [helper.make_tensor_value_info(n, t or F32, None) for (n, t) in outputs])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    onnx.save(m, path)


class Runner:
    """Queues one-node models; flush() runs every queued model in ONNX Runtime (one Node process
    for all of them) and in mminfer, then hands both engines' outputs to each job's callback,
    which may queue the next step."""

    def __init__(self, args, work):
        self.args, self.work, self.failures, self.count = args, work, 0, 0
        self.jobs = []

    def queue(self, label, path, feeds, outputs, then):
        """feeds: {name: array}; outputs: output names; then(ort, mm) gets {name: array} each."""
        d = os.path.join(self.work, label)
        os.makedirs(d, exist_ok=True)
        files = {}
        for n, a in feeds.items():
            files[n] = os.path.join(d, f"in_{n}.npy")
            np.save(files[n], a)
        self.jobs.append((path, files, d, outputs, then))

    def flush(self):
        while self.jobs:
            jobs, self.jobs = self.jobs, []
            spec = os.path.join(self.work, "ort_jobs.json")
            with open(spec, "w") as f:
                json.dump([{"model": p, "inputs": files, "output_dir": os.path.join(d, "ort")} for p, files, d, _, _ in jobs], f)
            run_tool([self.args.node, os.path.join(HERE, "ort_run_many.js"), spec], "ort_run_many.js")
            for path, files, d, outputs, then in jobs:
                run_mminfer(self.args.mminfer, path, files, os.path.join(d, "mminfer"))
                then({n: load_output(os.path.join(d, "ort"), n) for n in outputs},
                     {n: load_output(os.path.join(d, "mminfer"), n) for n in outputs})

    def compare(self, label, ort, mm, valid_rows=None):
        """valid_rows: {batch index: rows of `output` (axis 1) that ORT defines}; None: all."""
        for name, ref in ort.items():
            got = mm[name]
            self.count += 1
            if got.shape != ref.shape or got.dtype != ref.dtype:
                print(f"FAIL {label} {name}: {got.dtype}{list(got.shape)}, ORT {ref.dtype}{list(ref.shape)}")
                self.failures += 1
                continue
            a, b = got.astype(np.float64), ref.astype(np.float64)
            if name == "output" and valid_rows is not None:
                a = np.concatenate([a[i, :r] for i, r in valid_rows.items()])
                b = np.concatenate([b[i, :r] for i, r in valid_rows.items()])
            err = float(np.abs(a - b).max()) if a.size else 0.0
            rtol = self.args.rtol if ref.dtype != np.float16 else 2e-3  # one fp16 rounding step
            tol = rtol * max(1.0, float(np.abs(b).max()) if b.size else 0.0)
            ok = err <= tol and not np.isnan(a).any()
            self.failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {label} {name}: max abs error {err:.3g} (tolerance {tol:.3g})")


def gqa_cases(r, rng):
    B, S = 2, 5
    for heads, kv_heads, head, extra, dt in [
            (4, 2, 8, {}, np.float32),
            (4, 2, 16, {"do_rotary": 1}, np.float16),
            (4, 4, 16, {}, np.float32),
            (4, 2, 16, {"do_rotary": 1}, np.float32),
            (4, 2, 16, {"do_rotary": 1, "rotary_interleaved": 1}, np.float32),
            (4, 2, 8, {"local_window_size": 2}, np.float32),
            (4, 4, 8, {"softcap": 2.0, "scale": 0.7}, np.float32),
    ]:
        for max_len in (None, 8):  # past grows with each step, or is a max-length buffer
            label = f"gqa_n{heads}_kv{kv_heads}_h{head}" + "".join(f"_{k}{v}" for k, v in extra.items())
            label += (f"_max{max_len}" if max_len else "_grow") + ("_fp16" if dt == np.float16 else "")
            FT = TensorProto.FLOAT16 if dt == np.float16 else F32
            cos = sin = None
            if extra.get("do_rotary"):  # full rotation: cos/sin hold head / 2 values per position
                ang = rng.uniform(0, 6.3, size=(16, head // 2))
                cos, sin = np.cos(ang).astype(dt), np.sin(ang).astype(dt)

            def step_model(step, seq, past):
                path = os.path.join(r.work, f"{label}_step{step}.onnx")
                ins = [("query", FT, [B, seq, heads * head]), ("key", FT, [B, seq, kv_heads * head]),
                       ("value", FT, [B, seq, kv_heads * head])]
                ins += [("past_key", FT, [B, kv_heads, past, head]), ("past_value", FT, [B, kv_heads, past, head])] if past else [None, None]
                ins += [("seqlens_k", I32, [B]), ("total_sequence_length", I32, [])]
                if cos is not None:
                    ins += [("cos_cache", FT, list(cos.shape)), ("sin_cache", FT, list(sin.shape))]
                model("GroupQueryAttention", ins, [("output", FT), ("present_key", FT), ("present_value", FT)],
                      dict(num_heads=heads, kv_num_heads=kv_heads, **extra), path)
                return path, ins

            def step_feeds(ins, seqlens, total):
                feeds = {n: rng.standard_normal(s).astype(dt) for n, _, s in ins[:3]}
                feeds["seqlens_k"] = np.array(seqlens, np.int32)
                feeds["total_sequence_length"] = np.array(total, np.int32)
                if cos is not None:
                    feeds["cos_cache"], feeds["sin_cache"] = cos, sin
                return feeds

            # Prompt: batch 2, 5 tokens, the second sequence right-padded to 3 (seqlens_k = total - 1).
            prompt_seqlens = [4, 2]
            path0, ins0 = step_model(0, S, None)
            # Decode: one token each, after 5 and 3 cached tokens; each engine continues from its
            # own presents (zero-padded into a max-length buffer when max_len is set).
            past = max_len or S
            path1, ins1 = step_model(1, 1, past)
            feeds1 = step_feeds(ins1, [5, 3], S + 1)
            names = ["output", "present_key", "present_value"]

            def after_prompt(ort, mm, label=label, path1=path1, feeds1=feeds1, past=past, seqlens=prompt_seqlens):
                # Query rows past a padded sequence's end are undefined in ORT.
                r.compare(f"{label}_prompt", ort, mm, {b: seqlens[b] + 1 for b in range(B)})
                decoded = {}
                for engine, presents in (("ort", ort), ("mm", mm)):
                    f = dict(feeds1)
                    for kind in ("key", "value"):
                        p = presents[f"present_{kind}"]
                        buf = np.zeros((B, p.shape[1], past, p.shape[3]), p.dtype)
                        buf[:, :, :p.shape[2]] = p
                        f[f"past_{kind}"] = buf

                    def done(o, m, engine=engine):
                        decoded[engine] = o if engine == "ort" else m
                        if len(decoded) == 2:
                            r.compare(f"{label}_decode", decoded["ort"], decoded["mm"])
                    r.queue(f"{label}_decode_{engine}", path1, f, names, done)

            r.queue(f"{label}_prompt", path0, step_feeds(ins0, prompt_seqlens, S), names, after_prompt)


def gqa_chunked_prefill(r, rng):
    """Batch 1: 3 more prompt tokens after 5 cached ones (ORT's "subsequent prompt"), rotary on."""
    NQ, NK, H, P, S = 4, 2, 16, 5, 3
    label = "gqa_chunked_prefill"
    path = os.path.join(r.work, f"{label}.onnx")
    ins = [("query", F32, [1, S, NQ * H]), ("key", F32, [1, S, NK * H]), ("value", F32, [1, S, NK * H]),
           ("past_key", F32, [1, NK, P, H]), ("past_value", F32, [1, NK, P, H]),
           ("seqlens_k", I32, [1]), ("total_sequence_length", I32, []), ("cos_cache", F32, [16, H // 2]),
           ("sin_cache", F32, [16, H // 2])]
    names = ["output", "present_key", "present_value"]
    model("GroupQueryAttention", ins, [(n, None) for n in names], dict(num_heads=NQ, kv_num_heads=NK, do_rotary=1), path)
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, _, s in ins[:5]}
    ang = rng.uniform(0, 6.3, size=(16, H // 2))
    feeds.update(seqlens_k=np.array([P + S - 1], np.int32), total_sequence_length=np.array(P + S, np.int32),
                 cos_cache=np.cos(ang).astype(np.float32), sin_cache=np.sin(ang).astype(np.float32))
    r.queue(label, path, feeds, names, lambda ort, mm: r.compare(label, ort, mm))


def mha_cases(r, rng):
    B, N, H = 2, 4, 8
    D = N * H

    def run(label, S, L, attrs, past=0, bias=True, mask=None, attn_bias=False, cross=False, feeds_past=None, then=None):
        path = os.path.join(r.work, f"{label}.onnx")
        kshape = [B, N, L, H] if cross else [B, L, D]
        ins = [("query", F32, [B, S, D]), ("key", F32, kshape), ("value", F32, kshape),
               ("bias", F32, [3 * D]) if bias else None,
               ("key_padding_mask", I32, list(mask.shape)) if mask is not None else None,
               ("attention_bias", F32, [1, N, S, past + L]) if attn_bias else None]
        if past:
            ins += [("past_key", F32, [B, N, past, H]), ("past_value", F32, [B, N, past, H])]
        while ins[-1] is None:
            ins.pop()
        outs = [("output", None)] + ([] if cross else [("present_key", None), ("present_value", None)])
        model("MultiHeadAttention", ins, outs, dict(num_heads=N, **attrs), path)
        feeds = {n: rng.standard_normal(s).astype(np.float32) for n, t, s in (i for i in ins if i) if t == F32}
        if mask is not None:
            feeds["key_padding_mask"] = mask
        if feeds_past:
            feeds.update(feeds_past)

        def done(ort, mm):
            r.compare(label, ort, mm)
            if then:
                then(ort)
        r.queue(label, path, feeds, [n for n, _ in outs], done)

    run("mha_self", 5, 5, {})
    run("mha_self_nobias_scale", 5, 5, {"scale": 0.3}, bias=False)
    mask2 = np.ones((B, 5), np.int32)
    mask2[0, 4] = 0
    mask2[1, 2:] = 0
    run("mha_padding_mask_2d", 5, 5, {}, mask=mask2)
    run("mha_padding_lengths", 5, 5, {}, mask=np.array([5, 3], np.int32))
    run("mha_attention_bias", 5, 5, {}, attn_bias=True)
    run("mha_cross", 3, 7, {}, bias=False, cross=True)
    run("mha_cross_bias", 3, 7, {}, bias=True, cross=True)  # only the query's bias applies

    def decode(prompt):  # both engines continue from ORT's presents of the causal prompt
        past = {"past_key": prompt["present_key"], "past_value": prompt["present_value"]}
        run("mha_causal_decode", 1, 1, {"unidirectional": 1}, past=5, feeds_past=past)
        mask = np.ones((B, 6), np.int32)
        mask[1, 3:5] = 0
        run("mha_decode_padding_mask", 1, 1, {"unidirectional": 1}, past=5, mask=mask, feeds_past=past)
    run("mha_causal_prompt", 5, 5, {"unidirectional": 1}, then=decode)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mminfer", required=True)
    p.add_argument("--node", default="node")
    p.add_argument("--work", help="keep models and outputs here (default: a temporary folder)")
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--only", choices=["gqa", "mha"], help="run one op's cases")
    args = p.parse_args()
    if not os.path.exists(os.path.join(HERE, "node_modules", "onnxruntime-node", "package.json")):
        print("FAIL: onnxruntime-node is missing; run scripts/bootstrap")
        return 1
    with tempfile.TemporaryDirectory(prefix="mminfer-contrib-attn-") as tmp:
        work = args.work or tmp
        os.makedirs(work, exist_ok=True)
        r = Runner(args, work)
        rng = np.random.default_rng(17)
        try:
            if args.only in (None, "gqa"):
                gqa_cases(r, rng)
                gqa_chunked_prefill(r, rng)
            if args.only in (None, "mha"):
                mha_cases(r, rng)
            r.flush()
        except RuntimeError as e:
            print(f"FAIL: {e}")
            return 1
    print("PASS" if not r.failures else f"{r.failures} of {r.count} comparisons failed")
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
