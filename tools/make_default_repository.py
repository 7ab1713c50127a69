#!/usr/bin/python3
"""Sets up the model repository `mminfer serve` uses by default (models/repository):

  ocr/1      the PP-OCRv4 pipeline: a link to models/ppocr (fetched by scripts/bootstrap)
  clip/1     a CLIP-B/32-shaped pipeline: links to models/clip-b32's vision.onnx and text.onnx
             (random weights, made by tools/make_clip_b32.py), the BPE tokenizer we trained
             (tests/data/text/clip_bpe_tokenizer.json), pipeline.json with demo labels
  audio/1    a Whisper-encoder-shaped audio-encoder pipeline (tools/make_audio_encoder_pipeline.py)
  */config.json   batching for each; clip embeds images in INT8 within a cosine bound of FP32

  make_default_repository.py [ROOT]     ROOT defaults to models/

Idempotent: what is already there is left alone, so a rerun takes a moment.
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)

CLIP_MANIFEST = {
    "type": "clip",
    "files": {"image_encoder": "vision.onnx", "text_encoder": "text.onnx", "tokenizer": "tokenizer.json"},
    "preprocess": {"image_size": 224, "context_length": 77},
    "outputs": {"image_embeds": "image_embeds", "text_embeds": "text_embeds"},
    "logit_scale": 100.0,
    "labels": ["a document", "a photo", "a diagram", "a screenshot"],
    "templates": ["{}", "a picture of {}."],
}

CONFIGS = {
    # Up to 4 images per run: concurrent requests share the recognizer's width-bucket batches.
    "ocr": {"max_batch_size": 4, "max_queue_delay_us": 5000, "queue_capacity": 64},
    # Images in INT8 (text stays FP32), held at load to cosine >= 0.999 of FP32 on probe inputs.
    "clip": {"max_batch_size": 8, "max_queue_delay_us": 4000, "queue_capacity": 256, "latency_target_ms": 400,
             "precision": "vision=int8", "min_cosine": 0.999},
    "audio": {"max_batch_size": 4, "max_queue_delay_us": 4000, "queue_capacity": 64},
}


def write_if_changed(path, text):
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def link(target, at):
    """A relative symlink at `at` to `target`, replaced when it points elsewhere."""
    rel = os.path.relpath(target, os.path.dirname(at))
    if os.path.islink(at) and os.readlink(at) == rel:
        return
    if os.path.islink(at) or os.path.isfile(at):
        os.remove(at)
    elif os.path.isdir(at):
        shutil.rmtree(at)
    os.symlink(rel, at)


def main():
    models = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO_ROOT, "models"))
    repo = os.path.join(models, "repository")
    for name in CONFIGS:
        os.makedirs(os.path.join(repo, name), exist_ok=True)
        write_if_changed(os.path.join(repo, name, "config.json"), json.dumps(CONFIGS[name], indent=1) + "\n")

    ppocr = os.path.join(models, "ppocr")
    if not os.path.isfile(os.path.join(ppocr, "ch_PP-OCRv4_det_infer.onnx")):
        sys.exit(f"make_default_repository: {ppocr} lacks the PP-OCRv4 models; run scripts/bootstrap")
    link(ppocr, os.path.join(repo, "ocr", "1"))

    b32 = os.path.join(models, "clip-b32")
    subprocess.run([sys.executable, os.path.join(HERE, "make_clip_b32.py"), b32], check=True, stdout=subprocess.DEVNULL)
    clip = os.path.join(repo, "clip", "1")
    os.makedirs(clip, exist_ok=True)
    for f in ("vision.onnx", "text.onnx"):
        link(os.path.join(b32, f), os.path.join(clip, f))
    with open(os.path.join(REPO_ROOT, "tests", "data", "text", "clip_bpe_tokenizer.json"), encoding="utf-8") as f:
        write_if_changed(os.path.join(clip, "tokenizer.json"), f.read())
    write_if_changed(os.path.join(clip, "pipeline.json"), json.dumps(CLIP_MANIFEST, indent=1) + "\n")

    audio = os.path.join(repo, "audio", "1")
    subprocess.run([sys.executable, os.path.join(HERE, "make_audio_encoder_pipeline.py"), audio], check=True,
                   stdout=subprocess.DEVNULL)
    print(f"model repository ready: {repo} (ocr, clip, audio)")


if __name__ == "__main__":
    main()
