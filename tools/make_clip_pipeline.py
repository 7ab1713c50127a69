#!/usr/bin/python3
"""Builds a CLIP-shaped pipeline folder with small random-weight towers, so the `clip` pipeline
runs end to end (the shapes and op mix of CLIP, none of its knowledge), and torch's answers
beside it for the tests.

  make_clip_pipeline.py OUT [--force]

OUT receives
  vision.onnx      pixel_values [B, 3, 64, 64] -> last_hidden_state, image_embeds [B, 32]
                   (patch 16, width 64, 2 layers, 4 heads, QuickGELU; tools/reference_models.py)
  text.onnx        input_ids, attention_mask int64 [B, 77] -> last_hidden_state, text_embeds [B, 32]
                   (vocab of the tokenizer, causal mask, EOT pooling)
  tokenizer.json   tests/data/text/clip_bpe_tokenizer.json (tools/train_bpe.py's output)
  pipeline.json    type clip, both towers, preprocessing, labels and templates
  reference/       PNGs made here and expected.json: torch's L2-normalized embeddings of those
                   images and of some texts, and zero-shot probabilities, all computed in Python
                   (Pillow bicubic resize + centre crop + normalize; ids from train_bpe.py's
                   plain encoder), so mminfer is compared against an independent reference.

Both models are exported at opset 17 with a dynamic batch axis, the text tower with a dynamic
sequence axis too (the pipeline runs short texts at short lengths). OUT/.stamp holds a hash of the
generator sources, the tokenizer and torch's version: when it matches, nothing is regenerated.
"""
import argparse
import json
import os
import shutil
import sys

import generator_stamp  # tools/, the folder of this script

HERE = os.path.dirname(os.path.abspath(__file__))
TOKENIZER = os.path.join(HERE, "..", "tests", "data", "text", "clip_bpe_tokenizer.json")
SOURCES = [os.path.join(HERE, n) for n in ("make_clip_pipeline.py", "reference_models.py", "train_bpe.py",
                                           "text_corpus.py")] + [TOKENIZER]

IMAGE_SIZE, PATCH, CONTEXT, EMBED_DIM = 64, 16, 77, 32
MEAN = [0.48145466, 0.4578275, 0.40821073]
STD = [0.26862954, 0.26130258, 0.27577711]
LOGIT_SCALE = 100.0
SEED = 77
MANIFEST_LABELS = ["cat", "dog", "red square"]
MANIFEST_TEMPLATES = ["a photo of a {}.", "a drawing of the {}"]
CUSTOM_LABELS = ["sunset", "stripes", "noise", "a grey cat"]
CUSTOM_TEMPLATES = ["{}", "itap of a {}."]
TEXTS = [
    "a photo of a cat.",
    "A DOG running   on the beach!",
    "",
    "naïve café — 東京 in 2024",
    "it's 3 o'clock, isn't it?",
    # Over 77 tokens: CLIP truncates and keeps the end token.
    " ".join(["the quick brown fox jumps over the lazy dog"] * 12),
]


def sources_hash():
    return generator_stamp.sources_hash(SOURCES)


# --- images and their preprocessing, as CLIPImageProcessor does it ---------------------------

def make_images(folder):
    """A few PNGs of different sizes, aspect ratios and modes; returns their names."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(SEED)
    x = np.linspace(0, 1, 96)[None, :, None]
    y = np.linspace(0, 1, 64)[:, None, None]
    sunset = np.concatenate([255 * (1 - y) + 0 * x, 120 * x + 40 * y, 200 * y * x], -1)
    stripes = np.zeros((120, 48, 3))
    stripes[:, ::6] = (20, 200, 60)
    images = {
        "red.png": Image.new("RGB", (50, 50), (220, 30, 40)),
        "sunset.png": Image.fromarray(np.broadcast_to(sunset, (64, 96, 3)).round().astype(np.uint8)),
        "stripes.png": Image.fromarray(stripes.astype(np.uint8)),
        "noise.png": Image.fromarray(rng.integers(0, 256, (70, 71, 3), dtype=np.uint8)),
        "grey.png": Image.fromarray(np.tile(np.arange(0, 256, 4, dtype=np.uint8), (40, 1))).convert("L"),
        "alpha.png": Image.fromarray(rng.integers(0, 256, (33, 90, 4), dtype=np.uint8), "RGBA"),
    }
    for name, im in images.items():
        im.save(os.path.join(folder, name))
    return list(images)


def preprocess(path):
    """float32 [3, S, S]: short side to S (bicubic), centre crop, (v / 255 - mean) / std."""
    import numpy as np
    from PIL import Image

    im = Image.open(path).convert("RGB")
    w, h = im.size
    short, long = (w, h) if w <= h else (h, w)
    new_long = int(IMAGE_SIZE * long / short)
    im = im.resize((IMAGE_SIZE, new_long) if w <= h else (new_long, IMAGE_SIZE), Image.BICUBIC)
    left, top = (im.size[0] - IMAGE_SIZE) // 2, (im.size[1] - IMAGE_SIZE) // 2
    a = np.asarray(im.crop((left, top, left + IMAGE_SIZE, top + IMAGE_SIZE)), dtype=np.float64) / 255.0
    return ((a - MEAN) / STD).transpose(2, 0, 1).astype(np.float32)


# --- text ids from the plain Python encoder ---------------------------------------------------

class Encoder:
    def __init__(self, tokenizer_path):
        import train_bpe
        from text_corpus import byte_alphabet

        with open(tokenizer_path, encoding="utf-8") as f:
            model = json.load(f)["model"]
        self.vocab = model["vocab"]
        self.ranks = {tuple(m.split(" ")): i for i, m in enumerate(model["merges"])}
        self.alphabet = byte_alphabet()
        self.sot, self.eot = self.vocab[train_bpe.SOT], self.vocab[train_bpe.EOT]
        self.train_bpe = train_bpe

    def ids_and_mask(self, text):
        """[SOT] ids [EOT], cut to CONTEXT keeping the end token, padded with EOT (mask 0)."""
        ids = [self.sot] + self.train_bpe.encode(text, self.vocab, self.ranks, self.alphabet) + [self.eot]
        if len(ids) > CONTEXT:
            ids = ids[:CONTEXT - 1] + [self.eot]
        n = len(ids)
        return ids + [self.eot] * (CONTEXT - n), [1] * n + [0] * (CONTEXT - n)


# --- models ----------------------------------------------------------------------------------

def build_models(vocab):
    import torch
    from reference_models import ClipText, ClipVision, _randomize

    torch.manual_seed(SEED)
    vision = _randomize(ClipVision(image_hw=(IMAGE_SIZE, IMAGE_SIZE), patch=PATCH, width=64, heads=4, layers=2,
                                   proj=EMBED_DIM), SEED)
    text = _randomize(ClipText(vocab=vocab, max_len=CONTEXT, width=64, heads=4, layers=2, proj=EMBED_DIM), SEED + 10)
    return vision, text


def export(vision, text, out):
    import onnx
    import torch

    batch, seq = {0: "batch"}, {0: "batch", 1: "sequence"}  # any text length: the pipeline buckets lengths
    with torch.no_grad():
        torch.onnx.export(vision, (torch.zeros(2, 3, IMAGE_SIZE, IMAGE_SIZE),), os.path.join(out, "vision.onnx"),
                          input_names=["pixel_values"], output_names=["last_hidden_state", "image_embeds"],
                          dynamic_axes={"pixel_values": batch, "last_hidden_state": batch, "image_embeds": batch},
                          opset_version=17, do_constant_folding=True)
        ids = torch.ones(2, CONTEXT, dtype=torch.long)
        ids[:, 5] = text.token_embedding.num_embeddings - 1
        torch.onnx.export(text, (ids, torch.ones_like(ids)), os.path.join(out, "text.onnx"),
                          input_names=["input_ids", "attention_mask"], output_names=["last_hidden_state", "text_embeds"],
                          dynamic_axes={"input_ids": seq, "attention_mask": seq, "last_hidden_state": seq,
                                        "text_embeds": batch},
                          opset_version=17, do_constant_folding=True)
    for name in ("vision.onnx", "text.onnx"):
        onnx.checker.check_model(onnx.load(os.path.join(out, name)))


def normalized(t):
    return t / t.norm(dim=-1, keepdim=True)


def zero_shot(image_embeds, text_embed, labels, templates):
    """Per image {label: probability}: softmax(logit_scale * cosine) over labels, each label's
    embedding the renormalized mean of its normalized template embeddings."""
    import torch

    prompts = [t.replace("{}", label) for label in labels for t in templates]
    per_prompt = normalized(text_embed(prompts)).view(len(labels), len(templates), -1)
    label_embeds = normalized(per_prompt.mean(dim=1))
    probs = torch.softmax(LOGIT_SCALE * image_embeds @ label_embeds.T, dim=-1)
    return [dict(zip(labels, row.tolist())) for row in probs]


def write_reference(vision, text, out):
    import numpy as np
    import torch

    ref = os.path.join(out, "reference")
    os.makedirs(os.path.join(ref, "images"), exist_ok=True)
    names = make_images(os.path.join(ref, "images"))
    pixels = torch.from_numpy(np.stack([preprocess(os.path.join(ref, "images", n)) for n in names]))
    encoder = Encoder(os.path.join(out, "tokenizer.json"))

    def text_embed(texts):
        pairs = [encoder.ids_and_mask(t) for t in texts]
        ids = torch.tensor([p[0] for p in pairs], dtype=torch.long)
        mask = torch.tensor([p[1] for p in pairs], dtype=torch.long)
        return text(ids, mask)[1]

    with torch.no_grad():
        image_embeds = normalized(vision(pixels)[1])
        text_embeds = normalized(text_embed(TEXTS))
        manifest_probs = zero_shot(image_embeds, text_embed, MANIFEST_LABELS, MANIFEST_TEMPLATES)
        custom_probs = zero_shot(image_embeds, text_embed, CUSTOM_LABELS, CUSTOM_TEMPLATES)
    expected = {
        "images": [{"file": f"images/{n}", "embedding": e.tolist()} for n, e in zip(names, image_embeds)],
        "texts": [{"text": t, "ids": encoder.ids_and_mask(t)[0], "attention_mask": encoder.ids_and_mask(t)[1],
                   "embedding": e.tolist()} for t, e in zip(TEXTS, text_embeds)],
        "classify": [
            {"labels": MANIFEST_LABELS, "templates": MANIFEST_TEMPLATES, "from_manifest": True,
             "results": [{"file": f"images/{n}", "probs": p} for n, p in zip(names, manifest_probs)]},
            {"labels": CUSTOM_LABELS, "templates": CUSTOM_TEMPLATES, "from_manifest": False,
             "results": [{"file": f"images/{n}", "probs": p} for n, p in zip(names, custom_probs)]},
        ],
    }
    with open(os.path.join(ref, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False, indent=1)


def write_manifest(out):
    manifest = {
        "type": "clip",
        "files": {"image_encoder": "vision.onnx", "text_encoder": "text.onnx", "tokenizer": "tokenizer.json"},
        "preprocess": {"image_size": IMAGE_SIZE, "mean": MEAN, "std": STD, "context_length": CONTEXT},
        "outputs": {"image_embeds": "image_embeds", "text_embeds": "text_embeds"},
        "logit_scale": LOGIT_SCALE,
        "labels": MANIFEST_LABELS,
        "templates": MANIFEST_TEMPLATES,
    }
    with open(os.path.join(out, "pipeline.json"), "w") as f:
        json.dump(manifest, f, indent=1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--force", action="store_true", help="regenerate even when the stamp matches")
    args = p.parse_args()

    digest = sources_hash()
    stamp = os.path.join(args.out, ".stamp")
    # Decide before importing torch: the import alone costs seconds.
    if not args.force and os.path.isfile(stamp) and open(stamp).read().strip() == digest:
        print(f"clip pipeline in {args.out} is up to date")
        return 0

    import warnings

    import torch

    sys.path.insert(0, HERE)
    # The exporter warns that advanced indexing breaks on negative indices; ours (ArgMax) are not.
    warnings.filterwarnings("ignore", message=".*advanced indexing.*", category=UserWarning)
    torch.set_num_threads(1)  # deterministic reductions in the reference values

    os.makedirs(args.out, exist_ok=True)
    if os.path.exists(stamp):
        os.remove(stamp)
    shutil.copyfile(TOKENIZER, os.path.join(args.out, "tokenizer.json"))
    with open(TOKENIZER, encoding="utf-8") as f:
        vocab = len(json.load(f)["model"]["vocab"])
    vision, text = build_models(vocab)
    export(vision, text, args.out)
    write_reference(vision, text, args.out)
    write_manifest(args.out)
    with open(stamp, "w") as f:
        f.write(digest + "\n")
    print(f"wrote a clip pipeline to {args.out} (vocab {vocab}, embeddings of {EMBED_DIM})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
