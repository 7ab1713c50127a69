#!/usr/bin/python3
"""Writes a model repository for `mminfer serve` end-to-end tests, and the inputs they send.

  make_serve_repository.py OUT --clip DIR --audio DIR --ocr DIR

OUT/repository/   what `mminfer serve --repository` reads
  clip/1     -> DIR of --clip (tools/make_clip_pipeline.py's folder)
  clip/2/       the same towers and tokenizer (links), pipeline.json with other labels and
                templates, so the served version can be told from its answers, and
                matryoshka_dimensions [8, 16] (what OpenAI's `dimensions` may ask of it)
  clip/config.json    batching: up to 16 images per run, waiting up to 100 ms for them; at most
                      64 items waiting per queue
  audio/1    -> DIR of --audio (tools/make_audio_encoder_pipeline.py's folder)
  audio/config.json   one clip per run, at most 2 waiting: embeddings under overload
  ocr/1      -> DIR of --ocr (PP-OCRv4, models/ppocr)
  tiny/1, tiny/2      model.onnx: y = x W + b, x float32 [batch, 4] -> y [batch, 3], each
                      version with its own W and b; config.json: two instances
  slow/1/model.onnx   x float32 [1, 1024] -> y [1, 1024] through a chain of [ROWS, 1024] x
                      [1024, 1024] MatMuls (a run takes ~100 ms or more on one thread)
  slow/config.json    one request per run, at most 4 waiting: the overload tests' target
OUT/inputs/
  line.png           one rendered line of text for OCR, its text in inputs.json
  fresh_*.png        noise images no other test sends, for the cache and batching tests
  inputs.json        tiny's W and b per version, the OCR line's text, the clip reference
                     images and the audio clips to send

Needs only numpy, Pillow and the onnx Python package (no torch): it runs in about a second and
rewrites everything each time.
"""
import argparse
import json
import os
import shutil
import sys

SEED = 4242
TINY_IN, TINY_OUT = 4, 3
SLOW_WIDTH, SLOW_ROWS, SLOW_LAYERS = 1024, 1024, 6
FRESH_IMAGES = 24
OCR_TEXT = "Serve 42 quick brown foxes"
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
# clip version 2 labels and templates: the clip generator's "custom" set, so torch's
# probabilities for them are in its reference/expected.json too.
CLIP_V2_LABELS = ["sunset", "stripes", "noise", "a grey cat"]
CLIP_V2_TEMPLATES = ["{}", "itap of a {}."]
# clip version 2 also claims Matryoshka training (OpenAI's `dimensions` may cut its embeddings
# to these lengths); version 1 and audio claim nothing, so there `dimensions` is refused.
CLIP_V2_MATRYOSHKA = [8, 16]


def save_model(graph, path):
    import onnx
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="make_serve_repository")
    model.ir_version = 8
    onnx.checker.check_model(model)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(model, path)


def tiny_model(path, w, b):
    """y = x W + b with a dynamic batch axis."""
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", TINY_IN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", TINY_OUT])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")])
    save_model(graph, path)


def slow_model(path, rng):
    """x [1, W] broadcast to [ROWS, W], then LAYERS x (MatMul by one [W, W] weight, Tanh), then
    the mean over rows: ~2 * ROWS * W * W * LAYERS flops that no pass can fold away (they depend
    on x)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    w = (rng.standard_normal((SLOW_WIDTH, SLOW_WIDTH)) / np.sqrt(SLOW_WIDTH)).astype(np.float32)
    nodes = [helper.make_node("Expand", ["x", "rows"], ["h0"])]
    for i in range(SLOW_LAYERS):
        nodes.append(helper.make_node("MatMul", [f"h{i}", "W"], [f"m{i}"]))
        nodes.append(helper.make_node("Tanh", [f"m{i}"], [f"h{i + 1}"]))
    nodes.append(helper.make_node("ReduceMean", [f"h{SLOW_LAYERS}"], ["y"], axes=[0], keepdims=1))
    graph = helper.make_graph(
        nodes, "slow",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SLOW_WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, SLOW_WIDTH])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(np.array([SLOW_ROWS, SLOW_WIDTH], np.int64), "rows")])
    save_model(graph, path)


def write_json(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=1, ensure_ascii=False)


def render_line(path, text):
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype(FONT, 40)
    left, top, right, bottom = font.getbbox(text)
    im = Image.new("RGB", (right - left + 80, bottom - top + 60), "white")
    ImageDraw.Draw(im).text((40 - left, 30 - top), text, font=font, fill="black")
    im.save(path)


def fresh_images(folder, rng, count):
    """Noise PNGs, each sent by one test only, so none is in the server's cache before."""
    import numpy as np
    from PIL import Image

    paths = []
    for i in range(count):
        paths.append(os.path.join(folder, f"fresh_{i:02d}.png"))
        Image.fromarray(rng.integers(0, 256, (40 + i, 56, 3), dtype=np.uint8)).save(paths[-1])
    return paths


def link(target, name):
    os.makedirs(os.path.dirname(name), exist_ok=True)
    os.symlink(os.path.abspath(target), name)


def clip_version_2(clip_dir, out):
    with open(os.path.join(clip_dir, "pipeline.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    manifest["labels"], manifest["templates"] = CLIP_V2_LABELS, CLIP_V2_TEMPLATES
    manifest["matryoshka_dimensions"] = CLIP_V2_MATRYOSHKA
    for name in manifest["files"].values():
        link(os.path.join(clip_dir, name), os.path.join(out, name))
    write_json(os.path.join(out, "pipeline.json"), manifest)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--clip", required=True, help="a clip pipeline folder (tools/make_clip_pipeline.py)")
    ap.add_argument("--audio", required=True, help="an audio-encoder pipeline folder (tools/make_audio_encoder_pipeline.py)")
    ap.add_argument("--ocr", required=True, help="an OCR pipeline folder (models/ppocr)")
    args = ap.parse_args()
    for what, d in (("--clip", args.clip), ("--audio", args.audio), ("--ocr", args.ocr)):
        if not os.path.isdir(d):
            sys.exit(f"make_serve_repository: {what} {d} is not a folder")

    import numpy as np

    rng = np.random.default_rng(SEED)
    repo, inputs = os.path.join(args.out, "repository"), os.path.join(args.out, "inputs")
    for d in (repo, inputs):
        shutil.rmtree(d, ignore_errors=True)

    link(args.clip, os.path.join(repo, "clip", "1"))
    clip_version_2(args.clip, os.path.join(repo, "clip", "2"))
    write_json(os.path.join(repo, "clip", "config.json"), {"max_batch_size": 16, "max_queue_delay_us": 100000,
                                                             "queue_capacity": 64})
    link(args.audio, os.path.join(repo, "audio", "1"))
    write_json(os.path.join(repo, "audio", "config.json"), {"max_batch_size": 1, "queue_capacity": 2})
    link(args.ocr, os.path.join(repo, "ocr", "1"))

    tiny = {}
    for version in (1, 2):
        w = rng.standard_normal((TINY_IN, TINY_OUT)).astype(np.float32)
        b = rng.standard_normal(TINY_OUT).astype(np.float32)
        tiny_model(os.path.join(repo, "tiny", str(version), "model.onnx"), w, b)
        tiny[str(version)] = {"W": w.tolist(), "b": b.tolist()}
    # Two instances: every tiny request runs on one of two copies, each with its own worker.
    write_json(os.path.join(repo, "tiny", "config.json"), {"queue_capacity": 64, "instances": 2})
    slow_model(os.path.join(repo, "slow", "1", "model.onnx"), rng)
    write_json(os.path.join(repo, "slow", "config.json"), {"max_batch_size": 1, "queue_capacity": 4, "threads": 1})

    os.makedirs(inputs)
    render_line(os.path.join(inputs, "line.png"), OCR_TEXT)
    fresh = fresh_images(inputs, rng, FRESH_IMAGES)
    with open(os.path.join(args.audio, "reference", "cases.json")) as f:
        clips = [os.path.join(args.audio, "reference", c["file"]) for c in json.load(f)["cases"]]
    with open(os.path.join(args.clip, "reference", "expected.json"), encoding="utf-8") as f:
        expected = json.load(f)
    write_json(os.path.join(inputs, "inputs.json"), {
        "tiny": tiny,
        "ocr_line": {"file": os.path.join(inputs, "line.png"), "text": OCR_TEXT},
        "fresh_images": fresh,
        "clip_images": [os.path.join(args.clip, "reference", i["file"]) for i in expected["images"]],
        "clip_v1": {"labels": expected["classify"][0]["labels"], "templates": expected["classify"][0]["templates"]},
        "clip_v2": {"labels": CLIP_V2_LABELS, "templates": CLIP_V2_TEMPLATES, "matryoshka_dimensions": CLIP_V2_MATRYOSHKA},
        "clip_classify": expected["classify"],
        "clip_dir": os.path.abspath(args.clip),
        "audio_dir": os.path.abspath(args.audio),
        "audio_clips": clips,
    })
    print(f"wrote a serve repository to {repo} and its test inputs to {inputs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
