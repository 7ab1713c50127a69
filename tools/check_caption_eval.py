#!/usr/bin/env python3
"""Measures an image-to-text folder's caption accuracy on its eval set through an engine and
compares it with torch's (reference/accuracy.json, written by tools/train_shapes_captioner.py):

    check_caption_eval.py FOLDER [--engine ort|mminfer] [--layout merged|split] [--min-accuracy A]

Each eval/*.png is read back, preprocessed as preprocessor_config.json says (ViTImageProcessor:
rescale, normalise; the images are already the model's size), captioned by greedy decoding
through the naive present->past loop (tools/check_generative_model.py's image_text_loop),
detokenised with the folder's tokenizer.json (byte-level BPE) and compared with the true caption
(exact match). Passes when every caption equals torch's, so the accuracies are equal too, and
the accuracy is at least --min-accuracy (the model is trained well enough to mean something)."""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_generative_model as cgm  # noqa: E402
from text_corpus import byte_alphabet  # noqa: E402


def fail(msg):
    sys.exit(f"check_caption_eval.py: error: {msg}")


def load_json(path):
    if not os.path.isfile(path):
        fail(f"{path} is missing (make the folder with tools/train_shapes_captioner.py)")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def pixel_values(folder, names, pre):
    from PIL import Image
    h, w = pre["size"]["height"], pre["size"]["width"]
    images = []
    for name in names:
        image = np.asarray(Image.open(os.path.join(folder, "eval", name)).convert("RGB"))
        if image.shape[:2] != (h, w):
            fail(f"eval/{name} is {image.shape[1]}x{image.shape[0]}, the model takes {w}x{h}")
        images.append(image)
    x = np.stack(images).astype(np.float32).transpose(0, 3, 1, 2)
    if pre.get("do_rescale", True):
        x = x * np.float32(pre["rescale_factor"])
    if pre.get("do_normalize", True):
        mean = np.array(pre["image_mean"], np.float32)[None, :, None, None]
        std = np.array(pre["image_std"], np.float32)[None, :, None, None]
        x = (x - mean) / std
    return np.ascontiguousarray(x, dtype=np.float32)


def detokenizer(folder):
    tok = load_json(os.path.join(folder, "tokenizer.json"))
    inverse = {v: k for k, v in tok["model"]["vocab"].items()}
    to_byte = {c: b for b, c in byte_alphabet().items()}
    specials = {t["id"] for t in tok["added_tokens"] if t["special"]}

    def decode(ids):
        text = "".join(inverse[i] for i in ids if i not in specials)
        return bytes(to_byte[c] for c in text).decode("utf-8", "replace")
    return decode


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder")
    ap.add_argument("--engine", choices=["ort", "mminfer"], default="ort")
    ap.add_argument("--layout", choices=["merged", "split"], default="merged")
    ap.add_argument("--min-accuracy", type=float, default=0.0)
    args = ap.parse_args()
    folder = args.folder
    info = load_json(os.path.join(folder, "reference", "reference.json"))
    torch_acc = load_json(os.path.join(folder, "reference", "accuracy.json"))
    truth = load_json(os.path.join(folder, "eval", "captions.json"))
    pre = load_json(os.path.join(folder, "preprocessor_config.json"))
    names = sorted(truth)
    start = info["decoder_start_token_id"]
    ref = {"pixel_values": pixel_values(folder, names, pre),
           "decoder_input_ids": np.full((len(names), 1), start, np.int64)}
    runner = {"mminfer": cgm.MminferRunner, "ort": cgm.OrtRunner}[args.engine]()
    try:
        tokens, _ = cgm.image_text_loop(runner, folder, info, ref, args.layout)
    finally:
        runner.close()
    decode = detokenizer(folder)
    predicted = {n: decode(row.tolist()) for n, row in zip(names, tokens)}
    exact = sum(predicted[n] == truth[n] for n in names)
    differ = [n for n in names if predicted[n] != torch_acc["predicted"].get(n)]
    ok = not differ and exact == torch_acc["exact_match"] and len(names) == torch_acc["images"]
    ok = ok and exact / len(names) >= args.min_accuracy
    print(f"{'PASS' if ok else 'FAIL'} {args.engine} {info['model']} {args.layout}: exact match {exact}/{len(names)} "
          f"= {exact / len(names):.4f}, torch {torch_acc['exact_match']}/{torch_acc['images']} "
          f"= {torch_acc['accuracy']:.4f} (at least {args.min_accuracy}); {len(differ)} captions differ from torch's")
    for n in differ[:5]:
        print(f"     {n}: {args.engine} {predicted[n]!r}, torch {torch_acc['predicted'].get(n)!r}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
