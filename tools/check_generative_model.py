#!/usr/bin/env python3
"""Runs the naive generation loop of a folder from make_generative_models.py through an engine's
plain session API, as ONNX Runtime users do with Optimum exports (each step's present.* fed
back as past_key_values.*), and compares the greedy tokens and each step's logits with torch's
reference in the folder's reference/.

    check_generative_model.py FOLDER... [--engine mminfer|ort]... [--rtol 1e-4]

  mminfer  the Python module (PYTHONPATH=build/python)
  ort      ONNX Runtime through tools/ort_session_pipe.js (onnxruntime-node), which proves the
           exported files valid

A step's logits match when max |engine - torch| <= rtol * max |torch| over that step's rows.
A model the engine cannot load fails with the engine's message and the model's op types, so a
missing op is named. Exit status 0 when every case of every engine matches."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


class MminferRunner:
    name = "mminfer"

    def __init__(self):
        try:
            import mminfer
        except ImportError:
            sys.exit("check_generative_model.py: error: cannot import mminfer (set PYTHONPATH=build/python)")
        self.mminfer, self.sessions = mminfer, {}

    def run(self, model, feed):
        if model not in self.sessions:
            self.sessions[model] = self.mminfer.InferenceSession(model, threads=1)
        s = self.sessions[model]
        names = [o.name for o in s.get_outputs()]
        return dict(zip(names, s.run(None, feed)))

    def close(self):
        pass


class OrtRunner:
    name = "ort"

    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="ort_pipe_")
        self.proc = subprocess.Popen([os.environ.get("MMINFER_NODE", "node"), os.path.join(HERE, "ort_session_pipe.js")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.count = 0

    def run(self, model, feed):
        self.count += 1
        step_dir = os.path.join(self.tmp.name, str(self.count))
        os.makedirs(step_dir)
        inputs = {}
        for name, a in feed.items():
            inputs[name] = os.path.join(step_dir, f"in.{name}.npy")
            np.save(inputs[name], np.ascontiguousarray(a))
        self.proc.stdin.write(json.dumps({"model": model, "inputs": inputs, "out_dir": step_dir}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("ort_session_pipe.js exited")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return {name: np.load(path) for name, path in reply["outputs"].items()}

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.tmp.cleanup()


def llama_loop(runner, folder, info, ref):
    model = os.path.join(folder, "model.onnx")
    ids, mask = ref["input_ids"], ref["attention_mask"]
    b = ids.shape[0]
    past = {}
    for i in range(info["num_layers"]):
        for kind in ("key", "value"):
            past[f"past_key_values.{i}.{kind}"] = np.zeros((b, info["kv_heads"], 0, info["head_dim"]), np.float32)
    position_ids = np.maximum(np.cumsum(mask, axis=-1) - 1, 0).astype(np.int64)
    tokens, logits = [], []
    for _ in range(info["new_tokens"]):
        out = runner.run(model, dict(input_ids=ids, attention_mask=mask, position_ids=position_ids, **past))
        last = out["logits"][:, -1, :]
        nxt = last.argmax(-1).astype(np.int64)[:, None]
        tokens.append(nxt)
        logits.append(last)
        ids = nxt
        mask = np.concatenate([mask, np.ones((b, 1), np.int64)], axis=1)
        position_ids = position_ids[:, -1:] + 1
        past = {k: out[k.replace("past_key_values", "present")] for k in past}
    return np.concatenate(tokens, axis=1), np.stack(logits)


def whisper_loop(runner, folder, info, ref, layout):
    """layout "split": decoder_model.onnx, then decoder_with_past_model.onnx; "merged":
    decoder_model_merged.onnx with use_cache_branch false (zero-length pasts), then true."""
    hidden = runner.run(os.path.join(folder, "encoder_model.onnx"),
                        {"input_features": ref["input_features"]})["last_hidden_state"]
    ids = ref["decoder_input_ids"]
    if layout == "merged":
        merged = os.path.join(folder, "decoder_model_merged.onnx")
        empty = np.zeros((ids.shape[0], info["heads"], 0, info["head_dim"]), np.float32)
        past = {f"past_key_values.{i}.{side}.{kind}": empty for i in range(info["num_layers"])
                for side in ("decoder", "encoder") for kind in ("key", "value")}
        out = runner.run(merged, dict(input_ids=ids, encoder_hidden_states=hidden, use_cache_branch=np.array([False]),
                                      **past))

        def next_step(nxt, past):
            return runner.run(merged, dict(input_ids=nxt, encoder_hidden_states=hidden,
                                           use_cache_branch=np.array([True]), **past))
    else:
        out = runner.run(os.path.join(folder, "decoder_model.onnx"), {"input_ids": ids, "encoder_hidden_states": hidden})

        def next_step(nxt, past):
            return runner.run(os.path.join(folder, "decoder_with_past_model.onnx"), dict(input_ids=nxt, **past))
    past = {k.replace("present", "past_key_values"): v for k, v in out.items() if k.startswith("present.")}
    tokens, logits = [], []
    for step in range(info["new_tokens"]):
        last = out["logits"][:, -1, :]
        nxt = last.argmax(-1).astype(np.int64)[:, None]
        tokens.append(nxt)
        logits.append(last)
        if step + 1 == info["new_tokens"]:
            break
        out = next_step(nxt, past)
        for k, v in out.items():  # the encoder's keys and values stay as the first step made them
            if k.startswith("present."):
                past[k.replace("present", "past_key_values")] = v
    return np.concatenate(tokens, axis=1), np.stack(logits)


def vlm_loop(runner, folder, info, ref, keep=None):
    """The transformers.js SmolVLM loop: vision_encoder.onnx on the pixels, embed_tokens.onnx on
    the prompt, the image features written over the <image> positions (row by row, in order),
    then decoder_model_merged.onnx on inputs_embeds with the present->past loop; each new token
    goes through embed_tokens.onnx again. keep(features, ids, embeds), for one prompt, picks the
    feature rows the decoder reads (a boolean per row); the others' <image> positions leave the
    prompt."""
    features = runner.run(os.path.join(folder, "vision_encoder.onnx"),
                          {"pixel_values": ref["pixel_values"]})["image_features"]
    # Reported on its own so a disagreement is placed in the vision encoder or the decoder.
    feature_error = float(np.abs(features - ref["image_features"]).max() / np.abs(ref["image_features"]).max())
    embed = os.path.join(folder, "embed_tokens.onnx")
    ids, mask = ref["input_ids"], ref["attention_mask"]
    embeds = runner.run(embed, {"input_ids": ids})["inputs_embeds"].copy()
    if keep is not None:
        rows = np.asarray(keep(features.reshape(-1, features.shape[-1]), ids[0], embeds[0]), bool)
        image_at = np.flatnonzero(ids[0] == info["image_token_id"])
        stay = np.ones(ids.shape[1], bool)
        stay[image_at[~rows]] = False
        ids, mask = ids[:, stay], mask[:, stay]
        features = features.reshape(-1, features.shape[-1])[rows][None]
        embeds = runner.run(embed, {"input_ids": ids})["inputs_embeds"].copy()
    where = ids == info["image_token_id"]
    if int(where.sum()) != features.shape[0] * features.shape[1]:
        raise RuntimeError(f"{int(where.sum())} <image> tokens in the prompt for {features.shape[0]} x "
                           f"{features.shape[1]} image features")
    embeds[where] = features.reshape(-1, features.shape[-1])
    b = ids.shape[0]
    empty = np.zeros((b, info["kv_heads"], 0, info["head_dim"]), np.float32)
    past = {f"past_key_values.{i}.{kind}": empty for i in range(info["num_layers"]) for kind in ("key", "value")}
    position_ids = np.maximum(np.cumsum(mask, axis=-1) - 1, 0).astype(np.int64)
    decoder = os.path.join(folder, "decoder_model_merged.onnx")
    tokens, logits = [], []
    for _ in range(info["new_tokens"]):
        out = runner.run(decoder, dict(inputs_embeds=embeds, attention_mask=mask, position_ids=position_ids, **past))
        last = out["logits"][:, -1, :]
        nxt = last.argmax(-1).astype(np.int64)[:, None]
        tokens.append(nxt)
        logits.append(last)
        embeds = runner.run(embed, {"input_ids": nxt})["inputs_embeds"]
        mask = np.concatenate([mask, np.ones((b, 1), np.int64)], axis=1)
        position_ids = position_ids[:, -1:] + 1
        past = {k: out[k.replace("past_key_values", "present")] for k in past}
    return np.concatenate(tokens, axis=1), np.stack(logits), {"image features": feature_error}


def image_text_loop(runner, folder, info, ref, layout):
    """VisionEncoderDecoder (ViT + GPT-2) greedy decoding as transformers' generate does it: the
    encoder once, the decoder start token, then one token per step through the cache; a row that
    produced eos gets eos from then on and the loop stops when every row has. layout as in
    whisper_loop."""
    hidden = runner.run(os.path.join(folder, "encoder_model.onnx"),
                        {"pixel_values": ref["pixel_values"]})["last_hidden_state"]
    ids = ref["decoder_input_ids"]
    eos = info["eos_token_id"]
    if layout == "merged":
        merged = os.path.join(folder, "decoder_model_merged.onnx")
        empty = np.zeros((ids.shape[0], info["heads"], 0, info["head_dim"]), np.float32)
        past = {f"past_key_values.{i}.{side}.{kind}": empty for i in range(info["num_layers"])
                for side in ("decoder", "encoder") for kind in ("key", "value")}
        out = runner.run(merged, dict(input_ids=ids, encoder_hidden_states=hidden,
                                      use_cache_branch=np.array([False]), **past))

        def next_step(nxt, past):
            return runner.run(merged, dict(input_ids=nxt, encoder_hidden_states=hidden,
                                           use_cache_branch=np.array([True]), **past))
    else:
        out = runner.run(os.path.join(folder, "decoder_model.onnx"), {"input_ids": ids, "encoder_hidden_states": hidden})

        def next_step(nxt, past):
            return runner.run(os.path.join(folder, "decoder_with_past_model.onnx"), dict(input_ids=nxt, **past))
    past = {k.replace("present", "past_key_values"): v for k, v in out.items() if k.startswith("present.")}
    done = np.zeros(ids.shape[0], bool)
    tokens, logits = [], []
    for step in range(info["new_tokens"]):
        last = out["logits"][:, -1, :]
        nxt = np.where(done, eos, last.argmax(-1)).astype(np.int64)
        done |= nxt == eos
        tokens.append(nxt[:, None])
        logits.append(last)
        if done.all() or step + 1 == info["new_tokens"]:
            break
        out = next_step(nxt[:, None], past)
        for k, v in out.items():
            if k.startswith("present.") and ".decoder." in k:
                past[k.replace("present", "past_key_values")] = v
    return np.concatenate(tokens, axis=1), np.stack(logits)


def layouts(folder, info):
    """(label, loop) per layout the folder has."""
    if info["kind"] == "decoder-only":
        return [("", llama_loop)]
    if info["kind"] == "vision-language":
        return [("", vlm_loop)]
    if info["kind"] == "image-to-text":
        return [("merged ", lambda *a: image_text_loop(*a, layout="merged")),
                ("split ", lambda *a: image_text_loop(*a, layout="split"))]
    found = []
    if os.path.exists(os.path.join(folder, "decoder_model_merged.onnx")):
        found.append(("merged ", lambda *a: whisper_loop(*a, layout="merged")))
    found.append(("split ", lambda *a: whisper_loop(*a, layout="split")))
    return found


def op_types(folder):
    import onnx
    ops = set()
    for f in sorted(os.listdir(folder)):
        if f.endswith(".onnx"):
            ops.update(n.op_type for n in onnx.load(os.path.join(folder, f), load_external_data=False).graph.node)
    return sorted(ops)


def check_case(runner, folder, info, case, rtol, layout, loop):
    ref = {k: np.load(os.path.join(folder, "reference", f)) for k, f in case["files"].items()}
    tokens, logits, *rest = loop(runner, folder, info, ref)
    stages = rest[0] if rest else {}  # relative errors of intermediate outputs, e.g. the image features
    if tokens.shape != ref["tokens"].shape:  # a loop that stopped at another step
        print(f"FAIL {runner.name} {info['model']} {layout}{case['case']}: {tokens.shape[1]} new tokens, "
              f"torch made {ref['tokens'].shape[1]}")
        return False
    worst = 0.0
    for step in range(ref["logits"].shape[0]):
        scale = float(np.abs(ref["logits"][step]).max())
        worst = max(worst, float(np.abs(logits[step] - ref["logits"][step]).max()) / scale)
    same = np.array_equal(tokens, ref["tokens"])
    first_diff = None if same else int(np.argwhere((tokens != ref["tokens"]).any(axis=0))[0][0])
    ok = same and worst <= rtol and all(e <= rtol for e in stages.values())
    label = f"{runner.name} {info['model']} {layout}{case['case']} (batch {tokens.shape[0]}, {tokens.shape[1]} new tokens)"
    detail = "tokens equal" if same else f"tokens differ from step {first_diff}"
    detail += "".join(f", {name} {e:.2e} relative" for name, e in stages.items())
    print(f"{'PASS' if ok else 'FAIL'} {label}: {detail}, max relative logit error {worst:.2e} (limit {rtol:.0e})")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--engine", action="append", choices=["mminfer", "ort"])
    ap.add_argument("--rtol", type=float, default=1e-4)
    args = ap.parse_args()
    infos = {}
    for folder in args.folders:
        ref_path = os.path.join(folder, "reference", "reference.json")
        if not os.path.isfile(ref_path):
            sys.exit(f"check_generative_model.py: error: {ref_path} is missing "
                     "(make the folder with tools/make_generative_models.py)")
        with open(ref_path) as f:
            infos[folder] = json.load(f)
    failures = 0
    for engine in args.engine or ["ort", "mminfer"]:
        runner = {"mminfer": MminferRunner, "ort": OrtRunner}[engine]()
        try:
            for folder in args.folders:
                info = infos[folder]
                for layout, loop in layouts(folder, info):
                    for case in info["cases"]:
                        try:
                            failures += not check_case(runner, folder, info, case, args.rtol, layout, loop)
                        except Exception as e:  # the engine refused: say what it said and what the model uses
                            failures += 1
                            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                            print(f"FAIL {engine} {info['model']} {layout}{case['case']}: {msg}")
                            print(f"     op types in {os.path.basename(folder)}: {', '.join(op_types(folder))}")
                            break
        finally:
            runner.close()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
