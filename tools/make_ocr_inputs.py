#!/usr/bin/python3
"""Writes fixed, image-like inputs for the PP-OCRv4 models (seeded, so every run is identical).

  make_ocr_inputs.py OUT [--det-size HxW]

OUT/det_x.npy (1x3xHxW, default 480x640), OUT/cls_x.npy (1x3x48x192), OUT/rec_x.npy (1x3x48x320).
Images are dark text-like strokes on a light, slightly tinted and noisy page, normalised the way
PaddleOCR does: det with the ImageNet mean/std, cls and rec with (x/255 - 0.5) / 0.5.
"""
import argparse
import os

import numpy as np


def page(h, w, rng):
    """An HxWx3 uint8-range image: a light page with rows of glyph-like dark strokes."""
    img = np.full((h, w, 3), 230.0) + rng.uniform(-15, 15, 3)
    img += np.linspace(0, 12, w)[None, :, None]  # uneven lighting
    line_h = max(8, h // 8) if h > 64 else int(h * 0.6)
    y = rng.integers(2, max(3, line_h // 2))
    while y + line_h <= h:
        x = rng.integers(0, max(1, w // 8))
        end = rng.integers(w // 2, w)
        while x < end:
            gw = int(rng.integers(max(2, line_h // 3), max(3, line_h)))
            ink = rng.uniform(10, 70)
            # a glyph: a vertical stroke, a horizontal bar, sometimes a second stroke
            img[y:y + line_h, x:x + max(1, gw // 4)] = ink
            bar = y + int(rng.integers(0, line_h))
            img[bar:bar + max(1, line_h // 8), x:x + gw] = ink
            if rng.random() < 0.5:
                img[y + line_h // 3:y + line_h, x + gw - max(1, gw // 4):x + gw] = ink
            x += gw + int(rng.integers(1, max(2, gw // 2)))
        y += line_h + int(rng.integers(line_h // 2, line_h + 1)) if h > 64 else h
    img += rng.normal(0, 4, img.shape)
    return np.clip(img, 0, 255)


def to_nchw(img, mean, std):
    x = (img / 255.0 - np.asarray(mean)) / np.asarray(std)
    return x.transpose(2, 0, 1)[None].astype(np.float32)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--det-size", default="480x640")
    args = p.parse_args()
    h, w = (int(v) for v in args.det_size.split("x"))
    if h % 32 or w % 32:
        raise SystemExit("--det-size: the detector needs multiples of 32")
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(20240607)
    det = to_nchw(page(h, w, rng), [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    np.save(os.path.join(args.out, "det_x.npy"), det)
    np.save(os.path.join(args.out, "cls_x.npy"), to_nchw(page(48, 192, rng), [0.5] * 3, [0.5] * 3))
    np.save(os.path.join(args.out, "rec_x.npy"), to_nchw(page(48, 320, rng), [0.5] * 3, [0.5] * 3))
    print(f"wrote det_x {list(det.shape)}, cls_x [1, 3, 48, 192], rec_x [1, 3, 48, 320] to {args.out}")


if __name__ == "__main__":
    main()
