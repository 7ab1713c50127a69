#!/usr/bin/python3
"""Makes a sample input for the PP-OCRv4 models and summarises what they returned.

  ocr_demo_summary.py make DIR        writes DIR/det_x.npy, DIR/cls_x.npy, DIR/rec_x.npy
  ocr_demo_summary.py show DIR KEYS   prints the outputs mminfer wrote under DIR/{det,cls,rec}
"""
import os
import sys

import numpy as np


def sample_image(h, w, seed):
    """A light page with dark horizontal strokes, normalised the way PaddleOCR does (x/255-0.5)/0.5."""
    rng = np.random.default_rng(seed)
    img = np.full((h, w), 235.0)
    for _ in range(max(1, h // 40)):
        y = rng.integers(4, max(5, h - 12))
        x0 = rng.integers(0, w // 4)
        x1 = rng.integers(w // 2, w)
        for x in range(x0, x1, 7):
            img[y:y + 8, x:x + 4] = 30.0
    img += rng.normal(0, 3, img.shape)
    img = np.clip(img, 0, 255) / 255.0
    chw = np.repeat(((img - 0.5) / 0.5)[None], 3, axis=0)
    return chw[None].astype(np.float32)


def make(out):
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, "det_x.npy"), sample_image(640, 640, 1))
    np.save(os.path.join(out, "cls_x.npy"), sample_image(48, 192, 2))
    np.save(os.path.join(out, "rec_x.npy"), sample_image(48, 320, 3))


def only_npy(folder):
    files = [f for f in os.listdir(folder) if f.endswith(".npy")]
    return np.load(os.path.join(folder, files[0]))


def show(out, keys_path):
    det = only_npy(os.path.join(out, "det"))
    print(f"det: probability map {det.shape}, max {det.max():.3f}, "
          f"{(det > 0.3).mean() * 100:.2f}% of pixels above the 0.3 text threshold")
    cls = only_npy(os.path.join(out, "cls"))
    print(f"cls: P(upright) {cls[0, 0]:.3f}, P(rotated 180) {cls[0, 1]:.3f}")
    rec = only_npy(os.path.join(out, "rec"))
    keys = [""] + [line.rstrip("\n") for line in open(keys_path, encoding="utf-8")] + [" "]
    best = rec[0].argmax(-1)
    chars, last = [], 0
    for idx in best:
        if idx != last and idx != 0 and idx < len(keys):
            chars.append(keys[idx])
        last = idx
    print(f"rec: {rec.shape[1]} time steps over {rec.shape[2]} classes; "
          f"greedy CTC text of the sample strokes: {''.join(chars)!r}")


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        show(sys.argv[2], sys.argv[3])
