#!/usr/bin/env python3
"""Writes the generative test models of issue 17: torch replicas with random weights (fixed
seeds) exported in the layouts Hugging Face Optimum / transformers.js publish, each folder with
config.json, generation_config.json, tokenizer.json and reference/ (torch's own greedy loop:
the prompts, the new token ids and the last position's logits at every step).

    make_generative_models.py OUT [--which llama-tiny,whisper-tiny-test,vlm-tiny] [--new-tokens N]

  llama-tiny         LLaMA-style decoder (d=64, 2 layers, 4 query / 2 KV heads, tied embeddings):
                     model.onnx, the "decoder with past merged" form (a zero-length past is the
                     first step)
  llama-79m          the issue's benchmark decoder (d=576, 12 layers, 9 / 3 heads, vocab 32000,
                     untied): only when asked
  whisper-tiny-test  Whisper-shaped encoder-decoder (d=64, 2+2 layers, 4 heads, 80 mel bins,
                     50 source positions): encoder_model.onnx, decoder_model_merged.onnx (If on
                     use_cache_branch) and the two graphs it merges, decoder_model.onnx and
                     decoder_with_past_model.onnx, as Optimum exports them
  whisper-tiny       the same at Whisper-tiny's dims (d=384, 4+4 layers, 6 heads, vocab 51865,
                     1500 source positions): only when asked
  whisper-base       Whisper-base's dims (d=512, 6+6 layers, 8 heads, vocab 51865, 1500 source
                     positions): only when asked
  vlm-tiny           SmolVLM / Idefics3-style VLM (SigLIP-style ViT d=32, 2 layers, 64x64 images
                     in 8x8 patches; pixel shuffle x2 -> 16 image tokens; LLaMA-style decoder as
                     llama-tiny): vision_encoder.onnx (pixel_values [B,3,H,W] -> image_features
                     [B,image_seq_len,d]), embed_tokens.onnx, decoder_model_merged.onnx (on
                     inputs_embeds, a zero-length past is the first step), the chat template and
                     preprocessor_config.json (one image at the encoder's size, no splitting);
                     reference/ also holds the PNGs and their pixel_values, and split_cases:
                     images split into Idefics3's tiles (idefics3_processor.py) with the
                     preprocessor_config.split*.json they were made with
  smolvlm-256m       the same at SmolVLM-256M's dims (ViT d=768, 12 layers, 512x512 in 16x16
                     patches, pixel shuffle x4 -> 64 image tokens; decoder d=576, 30 layers, 9 / 3
                     heads, vocab 49280, untied): only when asked

Each folder's stamp.txt holds a digest of the generator's sources and the options; a folder
whose stamp matches is left as it is (the ctest fixture then returns at once)."""
import argparse
import hashlib
import json
import os
import re
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generative_tokenizer as gt  # noqa: E402
import idefics3_processor as ip  # noqa: E402
import generative_torch as gm  # noqa: E402
import logmel_reference as lr  # noqa: E402
import merge_decoders  # noqa: E402
import whisper_timestamps as wt  # noqa: E402
from text_corpus import write_json  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "tests", "data", "text", "corpus.txt")
OPSET = 17
DEFAULT_WHICH = "llama-tiny,whisper-tiny-test,vlm-tiny"
LLAMA_PROMPTS = ["The quick brown fox jumps over the lazy dog.", "Hello, world! It's 12 o'clock."]
LLAMA_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# As in Whisper's vocabulary, the 1501 timestamps <|0.00|>..<|30.00|> follow <|notimestamps|>.
WHISPER_SPECIALS = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|de|>", "<|translate|>",
                    "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>",
                    *wt.timestamp_token_names()]
# Clips transcribed with timestamps for reference/ (seconds, seed; seed None: silence).
TIMESTAMP_CLIPS = [("speech-2.5s", 2.5, 1), ("speech-0.4s", 0.4, 4), ("silence-1.5s", 1.5, None),
                   ("speech-31.3s", 31.3, 5)]

LLAMA_CONFIGS = {
    "llama-tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, merges=400, init_gain=3.0, tie_word_embeddings=True, max_position_embeddings=256),
    "llama-79m": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=12, num_attention_heads=9,
                      num_key_value_heads=3, merges=1000, init_gain=3.0, vocab_size=32000, tie_word_embeddings=False,
                      max_position_embeddings=2048),
    # ~0.49B parameters (1.95 GB of FP32 weights) for memory-bound decode and the INT4 memory
    # figure (bench/int4_memory.py): not made by the tests. Its weights go to model.onnx.data and
    # it has no torch references (a greedy run at this size takes minutes).
    "llama-0.5b": dict(hidden_size=1024, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=16,
                       num_key_value_heads=4, merges=1000, init_gain=3.0, vocab_size=32000, tie_word_embeddings=False,
                       max_position_embeddings=2048, bench_only=True),
}
WHISPER_CONFIGS = {
    "whisper-tiny-test": dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                              decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256,
                              max_source_positions=50, max_target_positions=128, merges=400, init_gain=4.0),
    "whisper-tiny": dict(d_model=384, encoder_layers=4, decoder_layers=4, encoder_attention_heads=6,
                         decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536,
                         max_source_positions=1500, max_target_positions=448, merges=1000, init_gain=4.0, vocab_size=51865),
    "whisper-base": dict(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                         decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048,
                         # At these dims gain 4 repeats one or two tokens, and scaling the encoder as
                         # well makes float32 itself drift (3.5e-3 relative to float64 at gain 8): the
                         # decoder alone at 6 gives 38 distinct tokens in 64, 5.6e-6 from float64.
                         max_source_positions=1500, max_target_positions=448, merges=1000, init_gain=6.0,
                         encoder_init_gain=1.0, vocab_size=51865),
}


def scale_init(modules, gain):
    """Multiplies every weight matrix and kernel except the embeddings by gain. With PyTorch's
    default initialisation a random decoder repeats one token forever, which makes comparing
    greedy tokens meaningless; a larger gain makes each step's choice depend on the context
    (tens of distinct tokens in 64 steps) while the top-2 logit margins stay far above
    float32 rounding (reference.json records the smallest)."""
    with torch.no_grad():
        for module in modules:
            for name, p in module.named_parameters():
                if p.dim() >= 2 and "embed" not in name:
                    p.mul_(gain)


def top2_margin(logits):
    s = np.sort(logits, axis=-1)
    return float((s[..., -1] - s[..., -2]).min())


def make_tokenizer(merges, specials, vocab_size=None):
    """Byte-level BPE trained on the test corpus, the specials after it and, where the model's
    vocabulary is larger (the benchmark shapes), reserved tokens up to vocab_size."""
    with open(CORPUS, encoding="utf-8") as f:
        vocab, merge_list = gt.train(f.read(), merges)
    specials = list(specials)
    if vocab_size is not None:
        specials += [f"<|reserved_{i}|>" for i in range(vocab_size - len(vocab) - len(specials))]
    special_ids = {t: len(vocab) + i for i, t in enumerate(specials)}
    return vocab, merge_list, specials, special_ids


def write_tokenizer(out, vocab, merges, specials, extra_config, plain=()):
    write_json(os.path.join(out, "tokenizer.json"), gt.tokenizer_json(vocab, merges, specials, plain))
    write_json(os.path.join(out, "tokenizer_config.json"),
               dict({"tokenizer_class": "GPT2Tokenizer", "clean_up_tokenization_spaces": False}, **extra_config),
               compact=False)


def save_reference(out, case, arrays, meta):
    ref = os.path.join(out, "reference")
    os.makedirs(ref, exist_ok=True)
    for name, a in arrays.items():
        np.save(os.path.join(ref, f"{case}.{name}.npy"), a)
    return dict(meta, case=case, files={name: f"{case}.{name}.npy" for name in arrays})


# --- LLaMA ---------------------------------------------------------------------------------

def llama_greedy(model, cfg, input_ids, attention_mask, new_tokens):
    """Torch's greedy loop in the Optimum form: prefill with a zero-length past, then one token
    per step with attention_mask grown by one and position ids counting only real tokens."""
    b = input_ids.shape[0]
    kv, hd = cfg["num_key_value_heads"], cfg["hidden_size"] // cfg["num_attention_heads"]
    past = [torch.zeros(b, kv, 0, hd) for _ in range(2 * cfg["num_hidden_layers"])]
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    tokens, step_logits = [], []
    ids, mask = input_ids, attention_mask
    with torch.no_grad():
        for _ in range(new_tokens):
            logits, *past = model(ids, mask, position_ids, *past)
            last = logits[:, -1, :]
            nxt = last.argmax(-1, keepdim=True)
            tokens.append(nxt)
            step_logits.append(last)
            ids = nxt
            mask = torch.cat((mask, torch.ones(b, 1, dtype=mask.dtype)), dim=1)
            position_ids = position_ids[:, -1:] + 1
    return torch.cat(tokens, dim=1).numpy(), torch.stack(step_logits).numpy()


def external_weights(path):
    """Moves the file's initializers to PATH.data (as Optimum stores large models), so a loader
    can read them one at a time."""
    import onnx
    m = onnx.load(path)
    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=os.path.basename(path) + ".data", size_threshold=1024)


def make_llama(out, name, new_tokens, train=None):
    """train(model, cfg), when given, fits the weights (tools/train_phrase_llama.py) instead of
    the scaled random init."""
    spec = dict(LLAMA_CONFIGS[name])
    gain = spec.pop("init_gain")
    bench_only = spec.pop("bench_only", False)
    vocab, merges, specials, special_ids = make_tokenizer(spec.pop("merges"), LLAMA_SPECIALS, spec.pop("vocab_size", None))
    eos = special_ids["<|endoftext|>"]
    cfg = dict(spec, vocab_size=len(vocab) + len(specials), rms_norm_eps=1e-5, rope_theta=10000.0)
    torch.manual_seed(17)
    model = gm.LlamaForCausalLM(cfg).eval()
    if train:
        train(model, cfg)
        model.eval()
    else:
        scale_init([model], gain)
    n, kv, hd = cfg["num_hidden_layers"], cfg["num_key_value_heads"], cfg["hidden_size"] // cfg["num_attention_heads"]

    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
              "head_dim": hd, "bos_token_id": eos, "eos_token_id": eos, "pad_token_id": eos,
              "attention_bias": False, "mlp_bias": False, "torch_dtype": "float32", "use_cache": True,
              "initializer_range": 0.02, "rope_scaling": None, "pretraining_tp": 1}
    config.update(cfg)
    write_json(os.path.join(out, "config.json"), config, compact=False)
    write_json(os.path.join(out, "generation_config.json"),
               {"bos_token_id": eos, "eos_token_id": eos, "pad_token_id": eos, "do_sample": False,
                "max_new_tokens": new_tokens}, compact=False)
    write_tokenizer(out, vocab, merges, specials, {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                                                   "pad_token": "<|endoftext|>", "model_max_length": cfg["max_position_embeddings"]})

    # Trace with a non-empty past and two new tokens so every length stays symbolic.
    b, p, s = 2, 3, 2
    args = (torch.randint(0, cfg["vocab_size"], (b, s)), torch.ones(b, p + s, dtype=torch.int64),
            torch.arange(p, p + s).repeat(b, 1), *[torch.randn(b, kv, p, hd) for _ in range(2 * n)])
    past_names = [f"past_key_values.{i}.{kind}" for i in range(n) for kind in ("key", "value")]
    present_names = [f"present.{i}.{kind}" for i in range(n) for kind in ("key", "value")]
    axes = {"input_ids": {0: "batch_size", 1: "sequence_length"},
            "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
            "position_ids": {0: "batch_size", 1: "sequence_length"},
            "logits": {0: "batch_size", 1: "sequence_length"}}
    axes.update({k: {0: "batch_size", 2: "past_sequence_length"} for k in past_names})
    axes.update({k: {0: "batch_size", 2: "total_sequence_length"} for k in present_names})
    torch.onnx.export(model, args, os.path.join(out, "model.onnx"), opset_version=OPSET,
                      input_names=["input_ids", "attention_mask", "position_ids", *past_names],
                      output_names=["logits", *present_names], dynamic_axes=axes, do_constant_folding=True)
    if bench_only:
        del model
        external_weights(os.path.join(out, "model.onnx"))
        os.makedirs(os.path.join(out, "reference"), exist_ok=True)
        return {"kind": "decoder-only", "layout": "model.onnx + model.onnx.data", "num_layers": n, "kv_heads": kv,
                "head_dim": hd, "new_tokens": new_tokens, "cases": []}

    cases = []
    encoded = [gt.encode(t, vocab, merges) for t in LLAMA_PROMPTS]
    for case, prompts in (("b1", [0]), ("b2", [0, 1]), ("b1-second", [1])):
        width = max(len(encoded[i]) for i in prompts)
        ids = np.full((len(prompts), width), eos, dtype=np.int64)
        mask = np.zeros((len(prompts), width), dtype=np.int64)
        for row, i in enumerate(prompts):  # left padding, as batched generation does
            ids[row, width - len(encoded[i]):] = encoded[i]
            mask[row, width - len(encoded[i]):] = 1
        tokens, logits = llama_greedy(model, cfg, torch.from_numpy(ids), torch.from_numpy(mask), new_tokens)
        cases.append(save_reference(out, case, {"input_ids": ids, "attention_mask": mask, "tokens": tokens,
                                                "logits": logits},
                                    {"prompts": [LLAMA_PROMPTS[i] for i in prompts], "prompt_ids": [encoded[i] for i in prompts],
                                     "tokens": tokens.tolist(), "distinct_tokens": int(len(np.unique(tokens))),
                                     "min_top2_margin": top2_margin(logits)}))
    return {"kind": "decoder-only", "layout": "model.onnx (decoder with past merged)", "num_layers": n,
            "kv_heads": kv, "head_dim": hd, "new_tokens": new_tokens, "cases": cases}


# --- Whisper -------------------------------------------------------------------------------

def whisper_greedy(encoder, decoder, features, prompt, new_tokens):
    """Encoder once, the first decoder step on the forced prompt computes the cross-attention
    keys and values, every later step feeds one token and the grown self-attention cache."""
    first, with_past = gm.WhisperDecoderFirst(decoder), gm.WhisperDecoderWithPast(decoder)
    tokens, step_logits = [], []
    with torch.no_grad():
        hidden = encoder(features)
        logits, *presents = first(prompt, hidden)
        n = decoder.num_layers
        cross = [presents[4 * i + 2:4 * i + 4] for i in range(n)]
        self_kv = [presents[4 * i:4 * i + 2] for i in range(n)]
        for step in range(new_tokens):
            last = logits[:, -1, :]
            nxt = last.argmax(-1, keepdim=True)
            tokens.append(nxt)
            step_logits.append(last)
            if step + 1 == new_tokens:
                break
            past = [t for i in range(n) for t in (*self_kv[i], *cross[i])]
            logits, *presents = with_past(nxt, *past)
            self_kv = [presents[2 * i:2 * i + 2] for i in range(n)]
    return torch.cat(tokens, dim=1).numpy(), torch.stack(step_logits).numpy()


def in_window_timestamps(decoder, timestamp_begin, window_seconds):
    """A trained Whisper rarely predicts a timestamp past its window. The test model's window is
    1 s while its vocabulary has Whisper's 30 s of timestamps, so its (tied) embeddings of the
    timestamps past the window shrink and those inside grow: random weights then put segment
    boundaries inside the window, and the next window starts mid-window."""
    inside = timestamp_begin + int(round(window_seconds / wt.SECONDS_PER_TIMESTAMP)) + 1
    with torch.no_grad():
        decoder.embed_tokens.weight[timestamp_begin:inside] *= 1.5
        decoder.embed_tokens.weight[inside:timestamp_begin + wt.TIMESTAMP_COUNT] *= 0.5


def make_whisper(out, name, new_tokens):
    spec = dict(WHISPER_CONFIGS[name])
    gain = spec.pop("init_gain")
    encoder_gain = spec.pop("encoder_init_gain", gain)
    vocab, merges, specials, special_ids = make_tokenizer(spec.pop("merges"), WHISPER_SPECIALS, spec.pop("vocab_size", None))
    cfg = dict(spec, vocab_size=len(vocab) + len(specials), num_mel_bins=80)
    torch.manual_seed(18)
    encoder, decoder = gm.WhisperEncoder(cfg).eval(), gm.WhisperDecoder(cfg).eval()
    scale_init([encoder], encoder_gain)
    scale_init([decoder], gain)
    in_window_timestamps(decoder, special_ids["<|0.00|>"], 2 * cfg["max_source_positions"] // 100)
    n, heads, d = cfg["decoder_layers"], cfg["decoder_attention_heads"], cfg["d_model"]
    hd, frames = d // heads, 2 * cfg["max_source_positions"]
    sot, eot = special_ids["<|startoftranscript|>"], special_ids["<|endoftext|>"]
    prompt_ids = [sot, special_ids["<|en|>"], special_ids["<|transcribe|>"], special_ids["<|notimestamps|>"]]

    config = {"architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper",
              "activation_function": "gelu", "is_encoder_decoder": True, "num_hidden_layers": cfg["encoder_layers"],
              "bos_token_id": eot, "eos_token_id": eot, "pad_token_id": eot, "decoder_start_token_id": sot,
              "scale_embedding": False, "use_cache": True, "torch_dtype": "float32", "tie_word_embeddings": True}
    config.update(cfg)
    write_json(os.path.join(out, "config.json"), config, compact=False)
    write_json(os.path.join(out, "generation_config.json"),
               {"bos_token_id": eot, "eos_token_id": eot, "pad_token_id": eot, "decoder_start_token_id": sot,
                "no_timestamps_token_id": special_ids["<|notimestamps|>"],
                "lang_to_id": {"<|en|>": special_ids["<|en|>"], "<|de|>": special_ids["<|de|>"]},
                "task_to_id": {"transcribe": special_ids["<|transcribe|>"], "translate": special_ids["<|translate|>"]},
                "forced_decoder_ids": [[1, prompt_ids[1]], [2, prompt_ids[2]], [3, prompt_ids[3]]],
                "max_initial_timestamp_index": wt.MAX_INITIAL_INDEX,
                "max_length": cfg["max_target_positions"], "max_new_tokens": new_tokens}, compact=False)
    write_json(os.path.join(out, "preprocessor_config.json"),
               {"feature_extractor_type": "WhisperFeatureExtractor", "feature_size": 80, "sampling_rate": 16000,
                "hop_length": 160, "n_fft": 400, "chunk_length": frames * 160 // 16000, "nb_max_frames": frames,
                "n_samples": frames * 160, "padding_value": 0.0, "return_attention_mask": False}, compact=False)
    write_tokenizer(out, vocab, merges, specials, {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                                                   "pad_token": "<|endoftext|>",
                                                   "model_max_length": cfg["max_target_positions"]},
                    plain=set(wt.timestamp_token_names()))

    b = 2
    torch.onnx.export(encoder, (torch.randn(b, 80, frames),), os.path.join(out, "encoder_model.onnx"),
                      opset_version=OPSET, input_names=["input_features"], output_names=["last_hidden_state"],
                      dynamic_axes={"input_features": {0: "batch_size"}, "last_hidden_state": {0: "batch_size"}})
    dec_names = lambda prefix, i: [f"{prefix}.{i}.decoder.key", f"{prefix}.{i}.decoder.value"]  # noqa: E731
    enc_names = lambda prefix, i: [f"{prefix}.{i}.encoder.key", f"{prefix}.{i}.encoder.value"]  # noqa: E731
    hidden = torch.randn(b, cfg["max_source_positions"], d)
    first_out = ["logits"] + [x for i in range(n) for x in dec_names("present", i) + enc_names("present", i)]
    axes = {"input_ids": {0: "batch_size", 1: "decoder_sequence_length"},
            "encoder_hidden_states": {0: "batch_size", 1: "encoder_sequence_length"},
            "logits": {0: "batch_size", 1: "decoder_sequence_length"}}
    axes.update({k: {0: "batch_size", 2: "decoder_sequence_length"} for k in first_out[1:] if ".decoder." in k})
    axes.update({k: {0: "batch_size", 2: "encoder_sequence_length"} for k in first_out[1:] if ".encoder." in k})
    torch.onnx.export(gm.WhisperDecoderFirst(decoder), (torch.randint(0, cfg["vocab_size"], (b, 4)), hidden),
                      os.path.join(out, "decoder_model.onnx"), opset_version=OPSET,
                      input_names=["input_ids", "encoder_hidden_states"], output_names=first_out, dynamic_axes=axes)
    past_in = [x for i in range(n) for x in dec_names("past_key_values", i) + enc_names("past_key_values", i)]
    past_out = ["logits"] + [x for i in range(n) for x in dec_names("present", i)]
    axes = {"input_ids": {0: "batch_size", 1: "decoder_sequence_length"},
            "logits": {0: "batch_size", 1: "decoder_sequence_length"}}
    axes.update({k: {0: "batch_size", 2: "past_decoder_sequence_length"} for k in past_in if ".decoder." in k})
    axes.update({k: {0: "batch_size", 2: "encoder_sequence_length"} for k in past_in if ".encoder." in k})
    axes.update({k: {0: "batch_size", 2: "past_decoder_sequence_length + decoder_sequence_length"}
                 for k in past_out[1:]})
    p = 5
    past_args = [torch.randn(b, heads, p if ".decoder." in k else cfg["max_source_positions"], hd) for k in past_in]
    torch.onnx.export(gm.WhisperDecoderWithPast(decoder), (torch.randint(0, cfg["vocab_size"], (b, 1)), *past_args),
                      os.path.join(out, "decoder_with_past_model.onnx"), opset_version=OPSET,
                      input_names=["input_ids", *past_in], output_names=past_out, dynamic_axes=axes)
    merge_decoders.merge(os.path.join(out, "decoder_model.onnx"), os.path.join(out, "decoder_with_past_model.onnx"),
                         os.path.join(out, "decoder_model_merged.onnx"))

    cases = []
    gen = torch.Generator().manual_seed(19)
    for case, batch in (("b1", 1), ("b2", 2)):
        features = torch.randn(batch, 80, frames, generator=gen) * 0.5  # log-mel-like values around 0
        prompt = torch.tensor([prompt_ids] * batch, dtype=torch.int64)
        tokens, logits = whisper_greedy(encoder, decoder, features, prompt, new_tokens)
        cases.append(save_reference(out, case, {"input_features": features.numpy(), "decoder_input_ids": prompt.numpy(),
                                                "tokens": tokens, "logits": logits},
                                    {"tokens": tokens.tolist(), "distinct_tokens": int(len(np.unique(tokens))),
                                     "min_top2_margin": top2_margin(logits)}))
    timestamp_cases = whisper_timestamp_cases(out, encoder, decoder, special_ids, vocab, new_tokens, frames)
    return {"kind": "encoder-decoder", "prompt_ids": prompt_ids, "timestamp_cases": timestamp_cases, "layout": "encoder_model.onnx + decoder_model_merged.onnx (use_cache_branch) or decoder_model.onnx + "
            "decoder_with_past_model.onnx",
            "num_layers": n, "heads": heads, "head_dim": hd, "new_tokens": new_tokens, "cases": cases}


def whisper_timestamp_cases(out, encoder, decoder, special_ids, vocab, new_tokens, frames):
    """`transcribe --timestamps` in torch: each clip written as a WAV in reference/, cut into
    windows, each window's log-mel (tools/logmel_reference.py) through the encoder, then the greedy
    loop with Whisper's timestamp rules (tools/whisper_timestamps.py) on the prompt without
    <|notimestamps|>; segments are offset by their window's start."""
    rate, n_samples = 16000, frames * 160
    first, with_past = gm.WhisperDecoderFirst(decoder), gm.WhisperDecoderWithPast(decoder)
    begin_ts, eot = special_ids["<|0.00|>"], special_ids["<|endoftext|>"]
    rules = dict(eot=eot, no_timestamps=special_ids["<|notimestamps|>"], timestamp_begin=begin_ts,
                 max_initial_index=wt.MAX_INITIAL_INDEX)
    prompt = [special_ids["<|startoftranscript|>"], special_ids["<|en|>"], special_ids["<|transcribe|>"]]
    filters = lr.mel_filters(80)
    decode = lambda ids: gt.decode(ids, vocab)  # noqa: E731

    def decode_window(padded):
        feats = lr.log_mel(padded, filters, pad_to_30s=False)
        with torch.no_grad():
            hidden = encoder(torch.from_numpy(np.asarray(feats, np.float32)[None]))
        return wt.greedy(first, with_past, decoder.num_layers, hidden, prompt, rules, new_tokens)

    cases = []
    for name, seconds, seed in TIMESTAMP_CLIPS:
        raw = wt.speech_like_clip(seconds, seed) if seed is not None else np.zeros(int(seconds * rate), np.float32)
        samples = wt.write_wav(os.path.join(out, "reference", f"{name}.wav"), raw)
        windows, segments, text = wt.transcribe_seeking(samples, n_samples, rate, decode_window, begin_ts, eot, decode)
        every = [t for w in windows for t in w["tokens"]]
        cases.append({"clip": f"{name}.wav", "seconds": len(samples) / rate, "prompt_ids": prompt,
                      "window_tokens": [w["tokens"] for w in windows], "window_seeks": [w["seek"] for w in windows],
                      "window_starts": [w["start"] for w in windows], "segments": segments, "text": text,
                      "timestamp_tokens": sum(t >= begin_ts for t in every), "text_tokens": sum(t < eot for t in every)})
    return cases


# --- SmolVLM / Idefics3-style vision-language model ----------------------------------------

# SmolVLM's chat template (tokenizer_config.json's chat_template): for one user turn holding an
# image and a question it expands to "<|im_start|>User:<image>QUESTION<end_of_utterance>\nAssistant:".
VLM_CHAT_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{ message['role'] | capitalize }}"
    "{% if message['content'][0]['type'] == 'image' %}{{ ':' }}{% else %}{{ ': ' }}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{ line['text'] }}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n"
    "{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}")
VLM_QUESTIONS = ["What is in this image?", "Describe the shapes and their colours."]
VLM_SPECIALS = (["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<fake_token_around_image>", "<image>",
                 "<end_of_utterance>", "<global-img>"]
                + [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)])

VLM_CONFIGS = {
    "vlm-tiny": dict(
        text=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2,
                  tie_word_embeddings=True, max_position_embeddings=256, rope_theta=10000.0),
        vision=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=64,
                    patch_size=8),
        scale_factor=2, merges=400, init_gain=4.0),
    "smolvlm-256m": dict(
        text=dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                  num_key_value_heads=3, tie_word_embeddings=False, max_position_embeddings=8192, rope_theta=100000.0),
        vision=dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
                    image_size=512, patch_size=16),
        scale_factor=4, merges=1000, init_gain=3.0, vocab_size=49280),
}


def chat_prompt(question):
    """VLM_CHAT_TEMPLATE rendered for [{"role": "user", "content": [image, text]}] with
    add_generation_prompt (no Jinja here: the expansion is short and fixed)."""
    return f"<|im_start|>User:<image>{question}<end_of_utterance>\nAssistant:"


def expand_image_token(prompt, image_seq_len):
    """Idefics3's processor for one image without splitting: each <image> becomes the global
    image's block, <fake_token_around_image><global-img>, image_seq_len <image> tokens, and a
    closing <fake_token_around_image>."""
    block = "<fake_token_around_image><global-img>" + "<image>" * image_seq_len + "<fake_token_around_image>"
    return prompt.replace("<image>", block)


def encode_with_specials(text, vocab, merges, special_ids):
    """Special tokens are matched first (as the tokenizer's added tokens are); the text between
    them goes through byte-level BPE."""
    pattern = "(" + "|".join(re.escape(t) for t in sorted(special_ids, key=len, reverse=True)) + ")"
    ids = []
    for piece in re.split(pattern, text):
        if piece in special_ids:
            ids.append(special_ids[piece])
        elif piece:
            ids.extend(gt.encode(piece, vocab, merges))
    return ids


def draw_scene(width, height, variant):
    """A small picture with real structure (a gradient, a disc and a bar) so the vision encoder's
    input looks like an image, not noise. Returns uint8 [height, width, 3]."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    y, x = y / height, x / width
    img = np.stack([x * 200 + 30, y * 180 + 40, (1 - x) * 120 + 60], axis=-1)
    cx, cy, r = (0.3, 0.35, 0.2) if variant == 0 else (0.65, 0.6, 0.25)
    disc = (x - cx) ** 2 + (y - cy) ** 2 < r * r
    img[disc] = (230, 40, 40) if variant == 0 else (40, 200, 60)
    bar = (np.abs(y - (0.8 if variant == 0 else 0.2)) < 0.08) & (x > 0.1) & (x < 0.9)
    img[bar] = (20, 30, 220) if variant == 0 else (240, 220, 30)
    return np.clip(img, 0, 255).astype(np.uint8)


def write_png(path, rgb):
    from PIL import Image
    Image.fromarray(rgb, "RGB").save(path, format="PNG")


def pixel_values_of(rgb):
    """The preprocessor's arithmetic: rescale by 1/255, normalize with mean 0.5 and std 0.5, CHW."""
    return ((rgb.astype(np.float32) / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)


def vlm_greedy(vision, lm, cfg, input_ids, attention_mask, pixel_values, image_token_id, new_tokens):
    """Torch's VLM loop: the image features replace the embeddings at the <image> positions (in
    order, row by row), then the LLaMA loop of llama_greedy on embeddings; each new token is
    embedded with the same table."""
    b = input_ids.shape[0]
    kv, hd = cfg["num_key_value_heads"], cfg["hidden_size"] // cfg["num_attention_heads"]
    past = [torch.zeros(b, kv, 0, hd) for _ in range(2 * cfg["num_hidden_layers"])]
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    tokens, step_logits = [], []
    with torch.no_grad():
        features = vision(pixel_values)
        embeds = lm.embed_tokens(input_ids)
        embeds[input_ids == image_token_id] = features.reshape(-1, features.shape[-1])
        mask = attention_mask
        for _ in range(new_tokens):
            logits, *past = lm.run_embeds(embeds, mask, position_ids, past)
            last = logits[:, -1, :]
            nxt = last.argmax(-1, keepdim=True)
            tokens.append(nxt)
            step_logits.append(last)
            embeds = lm.embed_tokens(nxt)
            mask = torch.cat((mask, torch.ones(b, 1, dtype=mask.dtype)), dim=1)
            position_ids = position_ids[:, -1:] + 1
    return torch.cat(tokens, dim=1).numpy(), torch.stack(step_logits).numpy(), features.numpy()


def write_vlm_config(out, cfg, vcfg, scale, image_seq_len, special_ids, new_tokens):
    ids = {"bos_token_id": special_ids["<|im_start|>"], "eos_token_id": special_ids["<end_of_utterance>"],
           "pad_token_id": special_ids["<|im_end|>"]}
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    text_config = dict({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_act": "silu",
                        "head_dim": hd, "attention_bias": False, "mlp_bias": False, "rope_scaling": None}, **cfg, **ids)
    vision_config = dict({"model_type": "idefics3_vision", "hidden_act": "gelu_pytorch_tanh"}, **vcfg)
    config = dict({"architectures": ["Idefics3ForConditionalGeneration"], "model_type": "idefics3",
                   "image_token_id": special_ids["<image>"], "scale_factor": scale, "image_seq_len": image_seq_len,
                   "vocab_size": cfg["vocab_size"], "tie_word_embeddings": cfg["tie_word_embeddings"],
                   "torch_dtype": "float32", "use_cache": True, "text_config": text_config,
                   "vision_config": vision_config}, **ids)
    write_json(os.path.join(out, "config.json"), config, compact=False)
    write_json(os.path.join(out, "generation_config.json"), dict(ids, do_sample=False, max_new_tokens=new_tokens),
               compact=False)
    size = vcfg["image_size"]
    # One image per prompt at the encoder's resolution: resized to size x size, no splitting
    # into tiles (do_image_splitting false), so only the global image's block is in the prompt.
    write_json(os.path.join(out, "preprocessor_config.json"),
               {"image_processor_type": "Idefics3ImageProcessor", "do_convert_rgb": True, "do_resize": True,
                "size": {"longest_edge": size}, "max_image_size": {"longest_edge": size}, "resample": 1,
                "do_image_splitting": False, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
                "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "do_pad": True}, compact=False)
    write_json(os.path.join(out, "processor_config.json"),
               {"processor_class": "Idefics3Processor", "image_seq_len": image_seq_len}, compact=False)
    write_json(os.path.join(out, "chat_template.json"), {"chat_template": VLM_CHAT_TEMPLATE}, compact=False)


def export_vlm(out, vision, lm, cfg, vcfg):
    n, kv, hd = cfg["num_hidden_layers"], cfg["num_key_value_heads"], cfg["hidden_size"] // cfg["num_attention_heads"]
    b, size = 2, vcfg["image_size"]
    torch.onnx.export(vision, (torch.randn(b, 3, size, size),), os.path.join(out, "vision_encoder.onnx"),
                      opset_version=OPSET, input_names=["pixel_values"], output_names=["image_features"],
                      dynamic_axes={"pixel_values": {0: "batch_size"}, "image_features": {0: "batch_size"}})
    torch.onnx.export(gm.EmbedTokens(lm), (torch.randint(0, cfg["vocab_size"], (b, 3)),),
                      os.path.join(out, "embed_tokens.onnx"), opset_version=OPSET, input_names=["input_ids"],
                      output_names=["inputs_embeds"],
                      dynamic_axes={"input_ids": {0: "batch_size", 1: "sequence_length"},
                                    "inputs_embeds": {0: "batch_size", 1: "sequence_length"}})
    p, s = 3, 2  # a non-empty past and two new positions keep every length symbolic
    args = (torch.randn(b, s, cfg["hidden_size"]), torch.ones(b, p + s, dtype=torch.int64),
            torch.arange(p, p + s).repeat(b, 1), *[torch.randn(b, kv, p, hd) for _ in range(2 * n)])
    past_names = [f"past_key_values.{i}.{kind}" for i in range(n) for kind in ("key", "value")]
    present_names = [f"present.{i}.{kind}" for i in range(n) for kind in ("key", "value")]
    axes = {"inputs_embeds": {0: "batch_size", 1: "sequence_length"},
            "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
            "position_ids": {0: "batch_size", 1: "sequence_length"},
            "logits": {0: "batch_size", 1: "sequence_length"}}
    axes.update({k: {0: "batch_size", 2: "past_sequence_length"} for k in past_names})
    axes.update({k: {0: "batch_size", 2: "total_sequence_length"} for k in present_names})
    torch.onnx.export(gm.LlamaFromEmbeds(lm), args, os.path.join(out, "decoder_model_merged.onnx"), opset_version=OPSET,
                      input_names=["inputs_embeds", "attention_mask", "position_ids", *past_names],
                      output_names=["logits", *present_names], dynamic_axes=axes, do_constant_folding=True)


def make_vlm(out, name, new_tokens):
    spec = dict(VLM_CONFIGS[name])
    vocab, merges, specials, special_ids = make_tokenizer(spec["merges"], VLM_SPECIALS, spec.get("vocab_size"))
    cfg = dict(spec["text"], vocab_size=len(vocab) + len(specials), rms_norm_eps=1e-5)
    vcfg = dict(spec["vision"], num_channels=3, layer_norm_eps=1e-6)
    scale = spec["scale_factor"]
    image_seq_len = (vcfg["image_size"] // vcfg["patch_size"]) ** 2 // (scale * scale)
    image_token_id, pad = special_ids["<image>"], special_ids["<|im_end|>"]
    torch.manual_seed(26)  # a seed whose tiny model's greedy output varies (50+ distinct tokens in 64)
    lm = gm.LlamaForCausalLM(cfg).eval()
    vision = gm.Idefics3VisionEncoder(vcfg, cfg["hidden_size"], scale).eval()
    scale_init([lm], spec["init_gain"])

    write_vlm_config(out, cfg, vcfg, scale, image_seq_len, special_ids, new_tokens)
    write_tokenizer(out, vocab, merges, specials, {"bos_token": "<|im_start|>", "eos_token": "<end_of_utterance>",
                                                   "pad_token": "<|im_end|>", "unk_token": "<|endoftext|>",
                                                   "model_max_length": cfg["max_position_embeddings"],
                                                   "chat_template": VLM_CHAT_TEMPLATE})
    export_vlm(out, vision, lm, cfg, vcfg)

    size = vcfg["image_size"]
    ref = os.path.join(out, "reference")
    os.makedirs(ref, exist_ok=True)
    images = [draw_scene(size, size, v) for v in range(2)]
    for v, rgb in enumerate(images):
        write_png(os.path.join(ref, f"image{v}.png"), rgb)
    prompts = [expand_image_token(chat_prompt(q), image_seq_len) for q in VLM_QUESTIONS]
    named = {t: special_ids[t] for t in VLM_SPECIALS}  # not the reserved fillers of the full-size vocabulary
    encoded = [encode_with_specials(p, vocab, merges, named) for p in prompts]
    cases = []
    for case, rows in (("b1", [0]), ("b2", [0, 1]), ("b1-second", [1])):
        width = max(len(encoded[i]) for i in rows)
        ids = np.full((len(rows), width), pad, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for row, i in enumerate(rows):  # left padding, as batched generation does
            ids[row, width - len(encoded[i]):] = encoded[i]
            mask[row, width - len(encoded[i]):] = 1
        pixels = np.stack([pixel_values_of(images[i]) for i in rows])
        tokens, logits, features = vlm_greedy(vision, lm, cfg, torch.from_numpy(ids), torch.from_numpy(mask),
                                              torch.from_numpy(pixels), image_token_id, new_tokens)
        # How much the image moves the first step's logits: the splice matters to the check.
        no_image = lambda px: torch.zeros_like(torch.from_numpy(features))  # noqa: E731
        _, blind, _ = vlm_greedy(no_image, lm, cfg, torch.from_numpy(ids), torch.from_numpy(mask),
                                 torch.from_numpy(pixels), image_token_id, 1)
        image_effect = float(np.abs(blind[0] - logits[0]).max() / np.abs(logits[0]).max())
        cases.append(save_reference(out, case, {"input_ids": ids, "attention_mask": mask, "pixel_values": pixels,
                                                "image_features": features, "tokens": tokens, "logits": logits},
                                    {"questions": [VLM_QUESTIONS[i] for i in rows],
                                     "images": [f"image{i}.png" for i in rows],
                                     "prompts": [chat_prompt(VLM_QUESTIONS[i]) for i in rows],
                                     "prompt_ids": [encoded[i] for i in rows], "tokens": tokens.tolist(),
                                     "distinct_tokens": int(len(np.unique(tokens))),
                                     "min_top2_margin": top2_margin(logits),
                                     "first_step_logit_change_without_image": image_effect}))
    split_cases = make_vlm_split_cases(out, vision, lm, cfg, size, image_seq_len, vocab, merges, named, new_tokens)
    n, kv, hd = cfg["num_hidden_layers"], cfg["num_key_value_heads"], cfg["hidden_size"] // cfg["num_attention_heads"]
    return {"kind": "vision-language", "layout": "vision_encoder.onnx + embed_tokens.onnx + decoder_model_merged.onnx "
            "(inputs_embeds; a zero-length past is the first step)", "num_layers": n, "kv_heads": kv, "head_dim": hd,
            "image_token_id": image_token_id, "image_seq_len": image_seq_len, "image_size": size,
            "chat_template_expansion": "<|im_start|>User:<image>QUESTION<end_of_utterance>\\nAssistant:, then each "
            "<image> becomes <fake_token_around_image><global-img>, image_seq_len x <image>, <fake_token_around_image>",
            "new_tokens": new_tokens, "cases": cases, "split_cases": split_cases}


# Image splitting (do_image_splitting): (case, width, height, scene, size.longest_edge in tiles).
# Longest edge 3 tiles splits every image; 1 tile leaves one frame, stretched to the tile.
VLM_SPLIT_CASES = [("wide", 150, 80, 0, 3), ("tall", 50, 180, 1, 3), ("small", 40, 30, 0, 1)]


def make_vlm_split_cases(out, vision, lm, cfg, tile, image_seq_len, vocab, merges, named, new_tokens):
    """Torch's greedy answers for images split as Idefics3's processor does (idefics3_processor.py):
    the frames' pixels through the vision encoder as one batch, their features over the prompt's
    image tokens in frame order. Each case names the preprocessor_config.json it was made with."""
    ref = os.path.join(out, "reference")
    question = VLM_QUESTIONS[0]
    cases = []
    for case, width, height, scene, tiles in VLM_SPLIT_CASES:
        longest = tiles * tile
        pre = f"preprocessor_config.split{tiles}.json"
        config = json.load(open(os.path.join(out, "preprocessor_config.json")))
        config.update(do_image_splitting=True, size={"longest_edge": longest}, max_image_size={"longest_edge": tile})
        write_json(os.path.join(ref, pre), config, compact=False)
        rgb = draw_scene(width, height, scene)
        write_png(os.path.join(ref, f"{case}.png"), rgb)
        frames, rows, cols = ip.split(rgb, longest, tile)
        assert all(f.shape == (tile, tile, 3) for f in frames), [f.shape for f in frames]
        pixels = np.stack([pixel_values_of(f) for f in frames])
        prompt = chat_prompt(question).replace("<image>", ip.image_prompt(rows, cols, image_seq_len))
        ids = np.array([encode_with_specials(prompt, vocab, merges, named)], dtype=np.int64)
        image_tokens = int((ids == named["<image>"]).sum())
        assert image_tokens == len(frames) * image_seq_len
        tokens, logits, _ = vlm_greedy(vision, lm, cfg, torch.from_numpy(ids), torch.ones_like(torch.from_numpy(ids)),
                                       torch.from_numpy(pixels), named["<image>"], new_tokens)
        cases.append({"case": case, "image": f"{case}.png", "size": [width, height], "preprocessor": pre,
                      "question": question, "rows": rows, "cols": cols, "frames": len(frames),
                      "image_tokens": image_tokens, "prompt_ids": ids[0].tolist(), "tokens": tokens[0].tolist(),
                      "min_top2_margin": top2_margin(logits)})
    return cases


MAKERS = {**{k: make_llama for k in LLAMA_CONFIGS}, **{k: make_whisper for k in WHISPER_CONFIGS},
          **{k: make_vlm for k in VLM_CONFIGS}}


def stamp_of(name, new_tokens):
    h = hashlib.sha256(f"{name} {new_tokens} {torch.__version__}".encode())
    for f in ("make_generative_models.py", "generative_torch.py", "generative_tokenizer.py", "merge_decoders.py", "text_corpus.py",
              "whisper_timestamps.py", "logmel_reference.py", "idefics3_processor.py"):
        with open(os.path.join(HERE, f), "rb") as fh:
            h.update(fh.read())
    with open(CORPUS, "rb") as fh:
        h.update(fh.read())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--which", default=DEFAULT_WHICH, help=f"comma-separated, of: {', '.join(MAKERS)}")
    ap.add_argument("--new-tokens", type=int, default=64)
    args = ap.parse_args()
    names = [w for w in args.which.split(",") if w]
    unknown = [w for w in names if w not in MAKERS]
    if unknown:
        sys.exit(f"make_generative_models.py: error: unknown model {unknown[0]!r} (use {', '.join(MAKERS)})")
    torch.set_num_threads(1)
    for name in names:
        out = os.path.join(args.out, name)
        stamp = stamp_of(name, args.new_tokens)
        stamp_path = os.path.join(out, "stamp.txt")
        if os.path.exists(stamp_path) and open(stamp_path).read().strip() == stamp:
            print(f"{name}: up to date")
            continue
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        info = MAKERS[name](out, name, args.new_tokens)
        write_json(os.path.join(out, "reference", "reference.json"), dict(info, model=name), compact=False)
        with open(stamp_path, "w") as f:
            f.write(stamp + "\n")
        print(f"{name}: written to {out}")


if __name__ == "__main__":
    main()
