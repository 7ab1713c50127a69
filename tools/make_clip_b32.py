#!/usr/bin/python3
"""Exports CLIP ViT-B/32-shaped vision and text encoders with random weights, for benchmarks only
(the shapes and op mix of the real model, none of its knowledge).

  make_clip_b32.py [OUT] [--force]

OUT defaults to models/clip-b32 and receives, at opset 17 with a dynamic batch axis (and for the
text tower a dynamic sequence axis, so pipelines can run short texts at short lengths):
  vision.onnx   pixel_values [B, 3, 224, 224] -> last_hidden_state [B, 50, 768], image_embeds [B, 512]
                (patch 32, width 768, 12 layers, 12 heads, QuickGELU)
  text.onnx     input_ids, attention_mask [B, T <= 77] int64 -> last_hidden_state [B, T, 512], text_embeds [B, 512]
                (vocab 49408, width 512, 12 layers, 8 heads, causal mask, EOT pooling)
  pair.onnx     both towers in one graph (outputs prefixed vision/ and text/): two independent
                branches, for measuring branch concurrency
  inputs/pixel_values.npy, inputs/input_ids.npy, inputs/attention_mask.npy   sample batch-1 inputs
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# Bumped when the export changes, so existing folders are exported again.
EXPORT_VERSION = "2: text tower with a dynamic sequence axis\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", nargs="?", default=os.path.join(HERE, "..", "models", "clip-b32"))
    p.add_argument("--force", action="store_true", help="export even when both files exist")
    args = p.parse_args()
    vision_path, text_path = os.path.join(args.out, "vision.onnx"), os.path.join(args.out, "text.onnx")
    pair_path = os.path.join(args.out, "pair.onnx")
    stamp_path = os.path.join(args.out, ".export")
    current = os.path.isfile(stamp_path) and open(stamp_path).read() == EXPORT_VERSION
    if not args.force and current and os.path.isfile(vision_path) and os.path.isfile(text_path):
        if not os.path.isfile(pair_path):
            write_pair(vision_path, text_path, pair_path)
        print(f"{args.out} already holds vision.onnx and text.onnx (use --force to export again)")
        return 0

    import warnings

    import numpy as np
    import torch

    sys.path.insert(0, HERE)
    from reference_models import ClipText, ClipVision

    warnings.filterwarnings("ignore", message=".*advanced indexing.*", category=UserWarning)
    os.makedirs(os.path.join(args.out, "inputs"), exist_ok=True)
    torch.manual_seed(32)

    vision = ClipVision(image_hw=(224, 224), patch=32, width=768, heads=12, layers=12, proj=512).eval()
    pixels = torch.randn(1, 3, 224, 224)
    batch, seq = {0: "batch"}, {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(vision, (pixels,), vision_path, input_names=["pixel_values"],
                          output_names=["last_hidden_state", "image_embeds"], opset_version=17,
                          dynamic_axes={"pixel_values": batch, "last_hidden_state": batch, "image_embeds": batch})
    np.save(os.path.join(args.out, "inputs", "pixel_values.npy"), pixels.numpy())
    print(f"wrote {vision_path}")

    text = ClipText(vocab=49408, max_len=77, width=512, heads=8, layers=12, proj=512).eval()
    ids = torch.randint(1, 49406, (1, 77))
    ids[0, 0], ids[0, 20], ids[0, 21:] = 49406, 49407, 0  # start, end-of-text, padding
    mask = (torch.arange(77) <= 20).long()[None]
    with torch.no_grad():
        torch.onnx.export(text, (ids, mask), text_path, input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state", "text_embeds"], opset_version=17,
                          dynamic_axes={"input_ids": seq, "attention_mask": seq, "last_hidden_state": seq,
                                        "text_embeds": batch})
    np.save(os.path.join(args.out, "inputs", "input_ids.npy"), ids.numpy())
    np.save(os.path.join(args.out, "inputs", "attention_mask.npy"), mask.numpy())
    print(f"wrote {text_path}")
    write_pair(vision_path, text_path, pair_path)
    with open(stamp_path, "w") as f:
        f.write(EXPORT_VERSION)
    return 0


def write_pair(vision_path, text_path, pair_path):
    import onnx
    from onnx import compose

    towers = []
    for prefix, path in (("vision/", vision_path), ("text/", text_path)):
        # Inputs keep their names (they differ already); everything else gets the tower's prefix.
        towers.append(compose.add_prefix(onnx.load(path), prefix, rename_inputs=False))
    pair = compose.merge_models(towers[0], towers[1], io_map=[])
    onnx.save(pair, pair_path)
    print(f"wrote {pair_path}")


if __name__ == "__main__":
    sys.exit(main())
