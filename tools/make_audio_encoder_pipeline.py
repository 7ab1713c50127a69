#!/usr/bin/python3
"""Writes an `audio-encoder` pipeline folder: a Whisper-encoder-shaped model with random weights
and reference embeddings computed entirely in Python.

  make_audio_encoder_pipeline.py OUT [--force]

  OUT/encoder.onnx     WhisperEncoder of tools/reference_models.py at the real input size:
                       [batch, 80, 3000] log-mel frames (30 s) -> [batch, 1500, 64]; opset 17,
                       dynamic batch axis, fixed seed
  OUT/pipeline.json    type, files, preprocessing, output name and pooling
  OUT/reference/       test clips and, for each, what the pipeline must return:
     <clip>.<wav|flac>      made with espeak-ng and sox
     <clip>.samples.npy     the 16 kHz mono float32 samples the Python side used
     <clip>.mean.npy        pooled ("mean"), L2-normalised embedding, float32 [64]
     <clip>.first.npy       the same with "first" pooling
     cases.json             per clip: file, samples, whether it was resampled, chunks

The Python side shares no code with mminfer: sox decodes, mixes down and (for the speech clip,
recorded at espeak-ng's 22050 Hz) resamples with its `rate -v` (linear-phase, 95% bandwidth),
where mminfer uses libsndfile and libsamplerate's SINC_BEST; the two resamplers differ near
8 kHz, so embeddings of the resampled clip agree to 1 - cosine ~5e-7, not to rounding. Clips
already at 16 kHz reach mminfer as the same samples (1 - cosine ~1e-13). Log-mel comes from
tools/logmel_reference.py (numpy + torch.stft in float64), the encoder runs in torch.

Pooling, as the pipeline does it: audio is cut into 30 s chunks; a chunk's encoder positions that
hold real audio are the first ceil(valid_frames / 2) (the second conv has stride 2), where
valid_frames = min(3000, ceil(samples / 160)). "mean" averages the hidden states over the real
positions of every chunk together; "first" averages the chunks' first positions. Both are then
L2-normalised.

OUT/.stamp holds a hash of the sources, torch's version and the sox and espeak-ng versions: when it
matches, nothing is regenerated.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys

import generator_stamp  # tools/, the folder of this script

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = [os.path.join(HERE, n) for n in ("make_audio_encoder_pipeline.py", "reference_models.py", "logmel_reference.py")]

SEED = 505
SAMPLE_RATE, N_MELS, N_FFT, HOP, CHUNK_SECONDS = 16000, 80, 400, 160, 30
CHUNK = SAMPLE_RATE * CHUNK_SECONDS
FRAMES = CHUNK // HOP  # 3000
WIDTH, HEADS, LAYERS = 64, 4, 2
SPEECH = ("The quick brown fox jumps over the lazy dog. "
          "An audio encoder turns thirty seconds of speech into one vector.")

PIPELINE = {
    "type": "audio-encoder",
    "files": {"encoder": "encoder.onnx"},
    "preprocess": {"sample_rate": SAMPLE_RATE, "n_mels": N_MELS, "n_fft": N_FFT, "hop": HOP,
                   "chunk_seconds": CHUNK_SECONDS},
    "outputs": {"hidden": "last_hidden_state"},
    "pooling": "mean",
}

# file name -> whether the Python side resamples it (its rate is not 16 kHz)
CLIPS = {
    "speech_22k.wav": True,   # espeak-ng's own rate: exercises both resamplers
    "sweep_16k.flac": False,  # sox sine sweep with pink noise, FLAC
    "short_16k.wav": False,   # 0.5 s of speech
    "stereo_16k.wav": False,  # speech, right channel at half level: the mixdown must be the mean
    "long_16k.flac": False,   # ~52 s of speech: two chunks
}


def tool_versions():
    out = []
    for cmd in (["sox", "--version"], ["espeak-ng", "--version"]):
        if not shutil.which(cmd[0]):
            sys.exit(f"make_audio_encoder_pipeline: {cmd[0]} is missing; scripts/bootstrap installs it")
        out.append(subprocess.run(cmd, capture_output=True, text=True).stdout.strip())
    return out


def sources_hash():
    return generator_stamp.sources_hash(SOURCES, tool_versions())


def up_to_date(out, digest):
    stamp = os.path.join(out, ".stamp")
    if not os.path.isfile(stamp) or open(stamp).read().strip() != digest:
        return False
    return all(os.path.isfile(os.path.join(out, f)) for f in ("pipeline.json", "encoder.onnx", "reference/cases.json"))


def run(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def sox(*args):
    run("sox", "-D", *args)  # -D: no dither, so files are the same on every run


def make_clips(ref, tmp):
    p = lambda folder, name: os.path.join(folder, name)
    run("espeak-ng", "-w", p(ref, "speech_22k.wav"), SPEECH)  # 22050 Hz mono
    sox(p(ref, "speech_22k.wav"), "-r", "16000", p(tmp, "speech_16k.wav"))
    # -R: sox's noise generator repeats from run to run.
    sox("-R", "-r", "16000", "-c", "1", "-n", "-b", "16", p(ref, "sweep_16k.flac"),
        "synth", "3", "sine", "200-4000", "pinknoise", "mix", "vol", "0.4")
    sox(p(tmp, "speech_16k.wav"), p(ref, "short_16k.wav"), "trim", "0.4", "0.5")
    sox(p(tmp, "speech_16k.wav"), "-c", "2", p(ref, "stereo_16k.wav"), "remix", "1", "1v0.5")
    sox(p(tmp, "speech_16k.wav"), p(ref, "long_16k.flac"), "repeat", "7")


def load_16k_mono(path):
    """sox decodes, averages the channels and resamples when needed: float32 samples."""
    import numpy as np

    raw = subprocess.run(["sox", "-D", path, "-t", "raw", "-e", "float", "-b", "32", "-c", "1", "-",
                          "rate", "-v", str(SAMPLE_RATE)], check=True, capture_output=True).stdout
    return np.frombuffer(raw, "<f4").copy()


def build_model():
    import torch
    from reference_models import WhisperEncoder, _randomize

    torch.manual_seed(SEED)
    return _randomize(WhisperEncoder(mels=N_MELS, width=WIDTH, heads=HEADS, layers=LAYERS,
                                     max_positions=FRAMES // 2), SEED)


def export(model, path):
    import onnx
    import torch

    example = torch.randn(2, N_MELS, FRAMES, generator=torch.Generator().manual_seed(SEED))
    with torch.no_grad():
        torch.onnx.export(model, (example,), path, input_names=["input_features"],
                          output_names=["last_hidden_state"],
                          dynamic_axes={"input_features": {0: "batch"}, "last_hidden_state": {0: "batch"}},
                          opset_version=17, do_constant_folding=True)
    onnx.checker.check_model(onnx.load(path))


def embed(model, samples, filters):
    """The pipeline's answer in Python: chunks, log-mel, encoder, pooling, L2 normalisation."""
    import numpy as np
    import torch
    from logmel_reference import log_mel

    chunks = [samples[i:i + CHUNK] for i in range(0, len(samples), CHUNK)]
    features = np.stack([log_mel(c, filters, pad_to_30s=True) for c in chunks]).astype(np.float32)
    with torch.no_grad():
        hidden = model(torch.from_numpy(features)).double().numpy()  # [chunks, 1500, W]
    total, count = np.zeros(hidden.shape[2]), 0
    for c, h in zip(chunks, hidden):
        valid_frames = min(FRAMES, math.ceil(len(c) / HOP))
        positions = math.ceil(valid_frames / 2)
        total += h[:positions].sum(axis=0)
        count += positions
    mean = total / count
    first = hidden[:, 0].mean(axis=0)
    return [(v / np.linalg.norm(v)).astype(np.float32) for v in (mean, first)], len(chunks)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--force", action="store_true", help="regenerate even when the stamp matches")
    args = ap.parse_args()

    sys.path.insert(0, HERE)
    digest = sources_hash()
    if not args.force and up_to_date(args.out, digest):  # before importing torch: that alone takes seconds
        print(f"audio-encoder pipeline in {args.out} is up to date")
        return 0

    import tempfile

    import numpy as np
    import torch
    from logmel_reference import mel_filters

    torch.set_num_threads(1)  # deterministic reductions in the reference embeddings
    ref = os.path.join(args.out, "reference")
    os.makedirs(ref, exist_ok=True)
    stamp = os.path.join(args.out, ".stamp")
    if os.path.exists(stamp):
        os.remove(stamp)

    model = build_model()
    export(model, os.path.join(args.out, "encoder.onnx"))
    with open(os.path.join(args.out, "pipeline.json"), "w") as f:
        json.dump(PIPELINE, f, indent=1)

    filters = mel_filters(N_MELS)
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        make_clips(ref, tmp)
    for name, resampled in CLIPS.items():
        stem = name.rsplit(".", 1)[0]
        samples = load_16k_mono(os.path.join(ref, name))
        (mean, first), chunks = embed(model, samples, filters)
        np.save(os.path.join(ref, f"{stem}.samples.npy"), samples)
        np.save(os.path.join(ref, f"{stem}.mean.npy"), mean)
        np.save(os.path.join(ref, f"{stem}.first.npy"), first)
        cases.append({"file": name, "stem": stem, "resampled": resampled, "samples": len(samples), "chunks": chunks})
        print(f"{name}: {len(samples) / SAMPLE_RATE:.2f} s, {chunks} chunk(s)")
    with open(os.path.join(ref, "cases.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=1)
    with open(stamp, "w") as f:
        f.write(digest + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
