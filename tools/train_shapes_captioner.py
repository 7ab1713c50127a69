#!/usr/bin/env python3
"""Trains a small image captioner that really works, on synthetic scenes of coloured shapes
(tools/shape_scenes.py), and exports it as Hugging Face Optimum exports a
VisionEncoderDecoderModel(ViT, GPT-2):

    train_shapes_captioner.py OUT [--which shapes-captioner] [--steps N]

OUT/shapes-captioner/
  encoder_model.onnx            pixel_values [B,3,64,64] -> last_hidden_state [B,65,d]
  decoder_model.onnx            input_ids, encoder_hidden_states -> logits, present.{i}.decoder.*,
                                present.{i}.encoder.*
  decoder_with_past_model.onnx  input_ids, past_key_values.{i}.decoder.* / .encoder.* -> logits,
                                present.{i}.decoder.*
  decoder_model_merged.onnx     both, chosen by use_cache_branch
                                (each decoder also returns draft_logits [B, S, 4, vocab]: heads trained
                                after the model, on its frozen hidden states, to guess the tokens 2..5
                                positions ahead, for speculative decoding without a draft model)
  config.json, generation_config.json, tokenizer.json, tokenizer_config.json,
  preprocessor_config.json      (ViTImageProcessor)
  eval/NNNN.png, eval/captions.json       held-out scenes and their true captions
  reference/reference.json      torch's greedy tokens and logits for a few eval images (the
                                layout tools/check_generative_model.py reads)
  reference/accuracy.json       torch's greedy exact-match accuracy over the whole eval set
  stamp.txt                     digest of the sources and options: a matching folder is kept

Training is deterministic (fixed seeds, a fixed number of steps, --threads: 1 by default, since
on a shared 2-core machine a second torch thread waits more than it works). 1,200 steps of 64
scenes take about 175 s of CPU time and reach 256/256 exact captions on the eval set; the draft
heads' 1,200 steps take about a minute more.
`--which vit-gpt2` writes the same architecture at ViT-base / GPT-2 dimensions with random
weights (no training, no eval set; torch's greedy tokens for one random image) for speed
measurements."""
import argparse
import hashlib
import json
import os
import shutil
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generative_tokenizer as gt  # noqa: E402
import merge_decoders  # noqa: E402
import shape_scenes  # noqa: E402
import vit_gpt2_torch as vg  # noqa: E402
from text_corpus import byte_alphabet, write_json  # noqa: E402

OPSET = 17
EOS = "<|endoftext|>"
MEAN, STD = 0.5, 0.5
CONFIGS = {
    # Sized to train in a few minutes on one core: 16x16 patches of a 64x64 scene, d=96.
    "shapes-captioner": dict(hidden_size=96, layers=2, heads=4, ffn=256, patch=16, image=64, n_positions=16,
                             steps=1200, batch=64, lr=2e-3, eval_images=256, draft_heads=4, draft_steps=1200,
                             draft_lr=1e-2),
    "vit-gpt2": dict(hidden_size=768, layers=12, heads=12, ffn=3072, patch=16, image=224, n_positions=1024,
                     steps=0, eval_images=0, vocab_size=50257),
}


# --- tokenizer -----------------------------------------------------------------------------

def make_tokenizer():
    """Byte-level BPE trained on the caption words until every word is one token."""
    words = shape_scenes.all_words()
    vocab, merges = gt.train(" ".join(words * 2), 1000)
    return vocab, merges, len(vocab)


def decode(ids, vocab, eos_id):
    inverse = {v: k for k, v in vocab.items()}
    to_byte = {c: b for b, c in byte_alphabet().items()}
    text = "".join(inverse[i] for i in ids if i != eos_id and i in inverse)
    return bytes(to_byte[c] for c in text).decode("utf-8", "replace")


# --- data ----------------------------------------------------------------------------------

def pixel_values(images):
    """ViTImageProcessor at the model's own size: rescale by 1/255, normalise by mean/std."""
    x = images.astype(np.float32).transpose(0, 3, 1, 2) / 255.0
    return torch.from_numpy((x - MEAN) / STD)


def caption_batch(rng, n, vocab, merges, eos_id, length):
    images, captions = shape_scenes.batch(rng, n)
    ids = np.full((n, length + 1), eos_id, np.int64)  # [start, tokens..., eos, pad(eos)...]
    target_mask = np.zeros((n, length), np.float32)
    for row, c in enumerate(captions):
        t = gt.encode(c, vocab, merges)
        ids[row, 1:1 + len(t)] = t
        target_mask[row, :len(t) + 1] = 1  # the tokens and the eos that ends them
    return pixel_values(images), torch.from_numpy(ids), torch.from_numpy(target_mask), captions


# --- model ---------------------------------------------------------------------------------

def build(spec, vocab_size):
    enc_cfg = {"hidden_size": spec["hidden_size"], "num_hidden_layers": spec["layers"],
               "num_attention_heads": spec["heads"], "intermediate_size": spec["ffn"], "patch_size": spec["patch"],
               "image_size": spec["image"], "num_channels": 3, "layer_norm_eps": 1e-12}
    dec_cfg = {"n_embd": spec["hidden_size"], "n_layer": spec["layers"], "n_head": spec["heads"],
               "n_inner": spec["ffn"], "n_positions": spec["n_positions"], "vocab_size": vocab_size,
               "layer_norm_epsilon": 1e-5}
    return vg.ViTEncoder(enc_cfg), vg.GPT2Decoder(dec_cfg), enc_cfg, dec_cfg


def train(encoder, decoder, spec, vocab, merges, eos_id, log):
    torch.manual_seed(1)
    rng = np.random.default_rng(1)
    params = list(encoder.parameters()) + list(decoder.parameters())
    opt = torch.optim.AdamW(params, lr=spec["lr"], weight_decay=0.01)
    steps, warmup = spec["steps"], 100
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + np.cos(np.pi * min(s, steps) / steps)))
    length = 9  # the longest caption's 8 words and the eos
    start, cpu = time.time(), time.process_time()
    for step in range(steps):
        pix, ids, mask, _ = caption_batch(rng, spec["batch"], vocab, merges, eos_id, length)
        logits = decoder(ids[:, :-1], encoder(pix))
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                                                 reduction="none")
        loss = (loss * mask.reshape(-1)).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        if step % 100 == 0 or step + 1 == steps:
            log(f"step {step + 1}/{steps} loss {loss.item():.4f} ({time.time() - start:.0f} s, "
                f"{time.process_time() - cpu:.0f} s of CPU)")
        if os.environ.get("SHAPES_PROBE") and (step + 1) % 300 == 0:
            probe(encoder, decoder, vocab, eos_id, log)
    return time.time() - start, time.process_time() - cpu


def train_draft_heads(encoder, decoder, spec, vocab, merges, eos_id, log):
    """Trains DraftHeads on the frozen model's teacher-forced hidden states: head j at position i
    learns the token at i + 1 + j + 1. The model's own logits do not change."""
    torch.manual_seed(3)
    rng = np.random.default_rng(4)
    count, steps = spec["draft_heads"], spec["draft_steps"]
    heads = vg.DraftHeads(spec["hidden_size"], count)
    opt = torch.optim.AdamW(heads.parameters(), lr=spec["draft_lr"], weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + np.cos(np.pi * min(s, steps) / steps)))
    length, start = 9, time.time()
    for step in range(steps):
        pix, ids, mask, _ = caption_batch(rng, spec["batch"], vocab, merges, eos_id, length)
        with torch.no_grad():
            hidden = decoder.hidden(ids[:, :-1], encoder(pix))
        logits = heads(hidden, decoder.wte.weight.detach())
        total, weight = 0.0, 0.0
        for j in range(count):
            ahead = j + 1  # beyond the next token
            lg = logits[:, :length - ahead, j].reshape(-1, logits.shape[-1])
            loss = torch.nn.functional.cross_entropy(lg, ids[:, 1 + ahead:].reshape(-1), reduction="none")
            m = mask[:, ahead:].reshape(-1)
            total, weight = total + (loss * m).sum(), weight + m.sum()
        loss = total / weight
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 100 == 0 or step + 1 == steps:
            log(f"draft heads: step {step + 1}/{steps} loss {loss.item():.4f} ({time.time() - start:.0f} s)")
    heads.eval()
    with torch.no_grad():  # each head's teacher-forced accuracy on fresh scenes, for the log
        pix, ids, mask, _ = caption_batch(np.random.default_rng(5), 256, vocab, merges, eos_id, length)
        guess = heads(decoder.hidden(ids[:, :-1], encoder(pix)), decoder.wte.weight).argmax(-1)
        right = [((guess[:, :length - j - 1, j] == ids[:, j + 2:]).float() * mask[:, j + 1:]).sum() / mask[:, j + 1:].sum()
                 for j in range(count)]
    log("draft heads: tokens 2.." + str(count + 1) + " ahead guessed right " + ", ".join(f"{r:.3f}" for r in right))
    decoder.draft_heads = heads


def probe(encoder, decoder, vocab, eos_id, log):
    """Greedy exact match on 128 fresh scenes (a development aid: SHAPES_PROBE=1)."""
    images, captions = shape_scenes.batch(np.random.default_rng(3), 128)
    encoder.eval(), decoder.eval()
    tokens, _ = vg.greedy(encoder, decoder, pixel_values(images), eos_id, eos_id, 12)
    encoder.train(), decoder.train()
    predicted = [decode(row.tolist(), vocab, eos_id) for row in tokens]
    wrong = [(p, c) for p, c in zip(predicted, captions) if p != c]
    log(f"  probe: {128 - len(wrong)}/128 exact; e.g. {wrong[:2]}")


# --- export --------------------------------------------------------------------------------

def export(out, encoder, decoder, spec, vocab_size):
    n, heads, d = spec["layers"], spec["heads"], spec["hidden_size"]
    hd, b = d // heads, 2
    torch.onnx.export(encoder, (torch.randn(b, 3, spec["image"], spec["image"]),), os.path.join(out, "encoder_model.onnx"),
                      opset_version=OPSET, input_names=["pixel_values"], output_names=["last_hidden_state"],
                      dynamic_axes={"pixel_values": {0: "batch_size", 1: "num_channels", 2: "height", 3: "width"},
                                    "last_hidden_state": {0: "batch_size", 1: "encoder_sequence_length"}})
    dec_names = lambda prefix, i: [f"{prefix}.{i}.decoder.key", f"{prefix}.{i}.decoder.value"]  # noqa: E731
    enc_names = lambda prefix, i: [f"{prefix}.{i}.encoder.key", f"{prefix}.{i}.encoder.value"]  # noqa: E731
    seq = (spec["image"] // spec["patch"]) ** 2 + 1
    hidden = torch.randn(b, seq, d)
    draft = ["draft_logits"] if decoder.draft_heads is not None else []
    first_out = ["logits"] + [x for i in range(n) for x in dec_names("present", i) + enc_names("present", i)] + draft
    axes = {"input_ids": {0: "batch_size", 1: "decoder_sequence_length"},
            "encoder_hidden_states": {0: "batch_size", 1: "encoder_sequence_length"},
            "logits": {0: "batch_size", 1: "decoder_sequence_length"}}
    axes.update({k: {0: "batch_size", 1: "decoder_sequence_length"} for k in draft})
    axes.update({k: {0: "batch_size", 2: "decoder_sequence_length"} for k in first_out[1:] if ".decoder." in k})
    axes.update({k: {0: "batch_size", 2: "encoder_sequence_length"} for k in first_out[1:] if ".encoder." in k})
    torch.onnx.export(vg.DecoderFirst(decoder), (torch.randint(0, vocab_size, (b, 3)), hidden),
                      os.path.join(out, "decoder_model.onnx"), opset_version=OPSET,
                      input_names=["input_ids", "encoder_hidden_states"], output_names=first_out, dynamic_axes=axes)
    past_in = [x for i in range(n) for x in dec_names("past_key_values", i) + enc_names("past_key_values", i)]
    past_out = ["logits"] + [x for i in range(n) for x in dec_names("present", i)] + draft
    axes = {"input_ids": {0: "batch_size", 1: "decoder_sequence_length"},
            "logits": {0: "batch_size", 1: "decoder_sequence_length"}}
    axes.update({k: {0: "batch_size", 1: "decoder_sequence_length"} for k in draft})
    axes.update({k: {0: "batch_size", 2: "past_decoder_sequence_length"} for k in past_in if ".decoder." in k})
    axes.update({k: {0: "batch_size", 2: "encoder_sequence_length"} for k in past_in if ".encoder." in k})
    axes.update({k: {0: "batch_size", 2: "past_decoder_sequence_length + decoder_sequence_length"}
                 for k in past_out[1:] if k.startswith("present")})
    past_args = [torch.randn(b, heads, 4 if ".decoder." in k else seq, hd) for k in past_in]
    torch.onnx.export(vg.DecoderWithPast(decoder), (torch.randint(0, vocab_size, (b, 1)), *past_args),
                      os.path.join(out, "decoder_with_past_model.onnx"), opset_version=OPSET,
                      input_names=["input_ids", *past_in], output_names=past_out, dynamic_axes=axes)
    merge_decoders.merge(os.path.join(out, "decoder_model.onnx"), os.path.join(out, "decoder_with_past_model.onnx"),
                         os.path.join(out, "decoder_model_merged.onnx"))


def write_configs(out, spec, enc_cfg, dec_cfg, eos_id, max_new_tokens):
    encoder = {"model_type": "vit", "architectures": ["ViTModel"], "hidden_size": enc_cfg["hidden_size"],
               "num_hidden_layers": enc_cfg["num_hidden_layers"], "num_attention_heads": enc_cfg["num_attention_heads"],
               "intermediate_size": enc_cfg["intermediate_size"], "hidden_act": "gelu", "hidden_dropout_prob": 0.0,
               "attention_probs_dropout_prob": 0.0, "initializer_range": 0.02, "layer_norm_eps": enc_cfg["layer_norm_eps"],
               "image_size": enc_cfg["image_size"], "patch_size": enc_cfg["patch_size"], "num_channels": 3,
               "qkv_bias": True, "encoder_stride": enc_cfg["patch_size"]}
    decoder = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": dec_cfg["vocab_size"],
               "n_positions": dec_cfg["n_positions"], "n_embd": dec_cfg["n_embd"], "n_layer": dec_cfg["n_layer"],
               "n_head": dec_cfg["n_head"], "n_inner": dec_cfg["n_inner"], "activation_function": "gelu_new",
               "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "layer_norm_epsilon": dec_cfg["layer_norm_epsilon"],
               "initializer_range": 0.02, "scale_attn_weights": True, "use_cache": True, "add_cross_attention": True,
               "is_decoder": True, "tie_word_embeddings": True, "bos_token_id": eos_id, "eos_token_id": eos_id,
               "pad_token_id": eos_id, "decoder_start_token_id": eos_id}
    write_json(os.path.join(out, "config.json"),
               {"architectures": ["VisionEncoderDecoderModel"], "model_type": "vision-encoder-decoder",
                "is_encoder_decoder": True, "tie_word_embeddings": False, "torch_dtype": "float32",
                "decoder_start_token_id": eos_id, "bos_token_id": eos_id, "eos_token_id": eos_id, "pad_token_id": eos_id,
                "encoder": encoder, "decoder": decoder}, compact=False)
    write_json(os.path.join(out, "generation_config.json"),
               {"bos_token_id": eos_id, "eos_token_id": eos_id, "pad_token_id": eos_id, "decoder_start_token_id": eos_id,
                "do_sample": False, "num_beams": 1, "max_new_tokens": max_new_tokens}, compact=False)
    write_json(os.path.join(out, "preprocessor_config.json"),
               {"image_processor_type": "ViTImageProcessor", "do_resize": True,
                "size": {"height": spec["image"], "width": spec["image"]}, "resample": 2, "do_rescale": True,
                "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": [MEAN] * 3, "image_std": [STD] * 3},
               compact=False)


def write_tokenizer(out, vocab, merges, specials, n_positions):
    write_json(os.path.join(out, "tokenizer.json"), gt.tokenizer_json(vocab, merges, specials))
    write_json(os.path.join(out, "tokenizer_config.json"),
               {"tokenizer_class": "GPT2Tokenizer", "clean_up_tokenization_spaces": False, "bos_token": EOS,
                "eos_token": EOS, "pad_token": EOS, "unk_token": EOS, "model_max_length": n_positions}, compact=False)


# --- eval set and references ---------------------------------------------------------------

def write_eval(out, spec, encoder, decoder, vocab, eos_id, max_new_tokens):
    from PIL import Image
    rng = np.random.default_rng(2)  # held out: the training stream uses seed 1
    images, captions = shape_scenes.batch(rng, spec["eval_images"])
    eval_dir = os.path.join(out, "eval")
    os.makedirs(eval_dir)
    files = {}
    for i, (image, caption) in enumerate(zip(images, captions)):
        name = f"{i:04d}.png"
        Image.fromarray(image).save(os.path.join(eval_dir, name))
        files[name] = caption
    write_json(os.path.join(eval_dir, "captions.json"), files, compact=False)
    # Torch reads the PNGs back, as every engine's run of the eval does.
    loaded = np.stack([np.asarray(Image.open(os.path.join(eval_dir, n)).convert("RGB")) for n in files])
    assert np.array_equal(loaded, images)
    pix = pixel_values(loaded)
    tokens, logits = vg.greedy(encoder, decoder, pix, eos_id, eos_id, max_new_tokens)
    predicted = [decode(row.tolist(), vocab, eos_id) for row in tokens]
    exact = sum(p == c for p, c in zip(predicted, captions))
    ref = os.path.join(out, "reference")
    os.makedirs(ref)
    write_json(os.path.join(ref, "accuracy.json"),
               {"engine": "torch", "images": len(captions), "exact_match": exact, "accuracy": exact / len(captions),
                "predicted": dict(zip(files, predicted))}, compact=False)
    # Batch 4 mixes a one-shape caption with two-shape ones, so one row ends early and pads.
    short = next(i for i, c in enumerate(captions) if len(c.split()) == 3)
    rows = {"b1": [0], "b4": [short] + [i for i in range(1, 5) if i != short][:3]}
    return exact, len(captions), reference_cases(ref, encoder, decoder, pix, rows, list(files), vocab, eos_id,
                                                 max_new_tokens)


def reference_cases(ref, encoder, decoder, pix, rows_of_case, names, vocab, eos_id, max_new_tokens):
    """Torch's greedy tokens and per-step logits for a few images, as check_generative_model.py reads them."""
    cases = []
    for case, rows in rows_of_case.items():
        t, lg = vg.greedy(encoder, decoder, pix[rows], eos_id, eos_id, max_new_tokens)
        arrays = {"pixel_values": pix[rows].numpy(), "decoder_input_ids": np.full((len(rows), 1), eos_id, np.int64),
                  "tokens": t.numpy(), "logits": lg.numpy()}
        for name, a in arrays.items():
            np.save(os.path.join(ref, f"{case}.{name}.npy"), a)
        s = np.sort(lg.numpy(), axis=-1)
        cases.append({"case": case, "images": [names[r] for r in rows], "tokens": t.tolist(),
                      "captions": [decode(row, vocab, eos_id) for row in t.tolist()],
                      "min_top2_margin": float((s[..., -1] - s[..., -2]).min()),
                      "files": {name: f"{case}.{name}.npy" for name in arrays}})
    return cases


def make(out, name, steps, log):
    spec = dict(CONFIGS[name])
    if steps is not None and spec["steps"]:
        spec["steps"] = steps
    vocab, merges, eos_id = make_tokenizer()
    vocab_size = spec.pop("vocab_size", eos_id + 1)
    # At GPT-2's vocabulary size the ids after ours are reserved tokens, never produced.
    extra = [f"<|reserved_{i}|>" for i in range(vocab_size - eos_id - 1)]
    torch.manual_seed(0)
    encoder, decoder, enc_cfg, dec_cfg = build(spec, vocab_size)
    max_new_tokens = spec["n_positions"] - 1 if spec["steps"] else 32
    seconds, cpu = train(encoder.train(), decoder.train(), spec, vocab, merges, eos_id, log) if spec["steps"] else (0, 0)
    encoder.eval(), decoder.eval()
    if spec.get("draft_heads"):
        train_draft_heads(encoder, decoder, spec, vocab, merges, eos_id, log)
    torch.set_num_threads(1)
    export(out, encoder, decoder, spec, vocab_size)
    write_configs(out, spec, enc_cfg, dec_cfg, eos_id, max_new_tokens)
    write_tokenizer(out, vocab, merges, [EOS] + extra, spec["n_positions"])
    info = {"kind": "image-to-text", "model": name, "num_layers": spec["layers"], "heads": spec["heads"],
            "head_dim": spec["hidden_size"] // spec["heads"], "decoder_start_token_id": eos_id, "eos_token_id": eos_id,
            "new_tokens": max_new_tokens, "train_steps": spec["steps"], "train_seconds": round(seconds, 1),
            "train_cpu_seconds": round(cpu, 1)}
    if spec["eval_images"]:
        exact, total, cases = write_eval(out, spec, encoder, decoder, vocab, eos_id, max_new_tokens)
        log(f"{name}: torch greedy exact match {exact}/{total} = {exact / total:.3f} after {spec['steps']} steps "
            f"({seconds:.0f} s of training, {cpu:.0f} s of CPU)")
    else:  # random weights: a random image's greedy tokens, for the same checker
        ref = os.path.join(out, "reference")
        os.makedirs(ref)
        pix = torch.randn(1, 3, spec["image"], spec["image"], generator=torch.Generator().manual_seed(4))
        cases = reference_cases(ref, encoder, decoder, pix, {"b1": [0]}, ["random"], vocab, eos_id, max_new_tokens)
    write_json(os.path.join(out, "reference", "reference.json"), dict(info, cases=cases), compact=False)


def stamp_of(name, steps, threads):
    h = hashlib.sha256(f"{name} {steps} {threads} {torch.__version__}".encode())
    for f in ("train_shapes_captioner.py", "vit_gpt2_torch.py", "shape_scenes.py", "generative_tokenizer.py",
              "merge_decoders.py", "text_corpus.py"):
        with open(os.path.join(HERE, f), "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--which", default="shapes-captioner", help=f"comma-separated, of: {', '.join(CONFIGS)}")
    ap.add_argument("--steps", type=int, help="training steps (default: the model's own)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads while training (the result depends on it; default 1, see README)")
    args = ap.parse_args()
    names = [w for w in args.which.split(",") if w]
    unknown = [w for w in names if w not in CONFIGS]
    if unknown:
        sys.exit(f"train_shapes_captioner.py: error: unknown model {unknown[0]!r} (use {', '.join(CONFIGS)})")
    if args.steps is not None and args.steps < 1:
        sys.exit("train_shapes_captioner.py: error: --steps must be at least 1")
    if args.threads < 1:
        sys.exit("train_shapes_captioner.py: error: --threads must be at least 1")
    torch.set_num_threads(args.threads)
    for name in names:
        out = os.path.join(args.out, name)
        stamp = stamp_of(name, args.steps, args.threads)
        stamp_path = os.path.join(out, "stamp.txt")
        if os.path.exists(stamp_path) and open(stamp_path).read().strip() == stamp:
            print(f"{name}: up to date")
            continue
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        make(out, name, args.steps, lambda msg: print(msg, flush=True))
        with open(stamp_path, "w") as f:
            f.write(stamp + "\n")
        print(f"{name}: written to {out}")


if __name__ == "__main__":
    main()
