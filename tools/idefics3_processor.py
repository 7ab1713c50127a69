"""Idefics3 / SmolVLM image splitting and prompt expansion, in Python with Pillow, as transformers'
Idefics3ImageProcessor and Idefics3Processor describe them: the reference the VLM test model's
split cases are made with (tools/make_generative_models.py).

    frames, rows, cols = split(rgb, longest_edge, tile)   # uint8 [H, W, 3] frames
    image_prompt(rows, cols, image_seq_len)              # the text one <image> becomes"""
import math

import numpy as np
from PIL import Image


def _resized(rgb, width, height):
    """Pillow's LANCZOS resize of uint8 [H, W, 3] to width x height (8-bit in, 8-bit out)."""
    return np.asarray(Image.fromarray(rgb).resize((width, height), Image.Resampling.LANCZOS))


def longest_edge_size(width, height, longest):
    """The longest side becomes `longest`; the other is int(longest / aspect), bumped to even."""
    aspect = width / height
    if width >= height:
        w, h = longest, int(longest / aspect)
        h += h % 2
    else:
        w, h = int(longest * aspect), longest
        w += w % 2
    return max(w, 1), max(h, 1)


def encoder_size(width, height, tile):
    """Both sides raised to multiples of `tile`, the longer one first, the other from the aspect."""
    aspect = width / height
    if width >= height:
        w = math.ceil(width / tile) * tile
        h = math.ceil(int(w / aspect) / tile) * tile
    else:
        h = math.ceil(height / tile) * tile
        w = math.ceil(int(h * aspect) / tile) * tile
    return w, h


def split(rgb, longest, tile):
    """The frames the vision encoder sees, tiles row by row then the global image (alone when
    the image is no larger than tile x tile), with the rows and columns (0, 0 when unsplit)."""
    h, w = rgb.shape[:2]
    img = _resized(rgb, *longest_edge_size(w, h, longest))
    h, w = img.shape[:2]
    img = _resized(img, *encoder_size(w, h, tile))
    h, w = img.shape[:2]
    if h <= tile and w <= tile:
        return [img], 0, 0
    rows, cols = math.ceil(h / tile), math.ceil(w / tile)
    th, tw = math.ceil(h / rows), math.ceil(w / cols)
    frames = [img[r * th:min((r + 1) * th, h), c * tw:min((c + 1) * tw, w)] for r in range(rows) for c in range(cols)]
    frames.append(_resized(img, tile, tile))
    return frames, rows, cols


def image_prompt(rows, cols, image_seq_len):
    """The text one <image> expands to: per tile <fake_token_around_image><row_R_col_C> and the
    image tokens, a newline after each row; then a newline and the global image's block."""
    tokens = "<image>" * image_seq_len
    glob = f"<fake_token_around_image><global-img>{tokens}<fake_token_around_image>"
    if rows == 0 and cols == 0:
        return glob
    text = "".join("".join(f"<fake_token_around_image><row_{r + 1}_col_{c + 1}>{tokens}" for c in range(cols)) + "\n"
                   for r in range(rows))
    return text + "\n" + glob
