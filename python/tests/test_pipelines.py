"""mminfer.CLIP / Embedder and mminfer.OCR.

MMINFER_CLIP_PIPELINE: a folder made by tools/make_clip_pipeline.py (its reference/ holds torch's
answers); MMINFER_PPOCR_DIR: the PP-OCRv4 models; MMINFER_BIN: the command line, whose
`mminfer embed --jsonl` the embeddings must equal. Each test is skipped when its variable is unset.
"""
import io
import json
import os
import pathlib
import subprocess
import tempfile
import unittest

import numpy as np

import helpers
import mminfer

CLIP_DIR = helpers.env_path("MMINFER_CLIP_PIPELINE")
PPOCR_DIR = helpers.env_path("MMINFER_PPOCR_DIR")
MMINFER_BIN = helpers.env_path("MMINFER_BIN")
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
TEXTS = ["a photo of a cat.", "A DOG running   on the beach!", "naïve café — 東京 in 2024"]


def cosine(a, b):
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


@unittest.skipUnless(CLIP_DIR, "MMINFER_CLIP_PIPELINE (a folder made by tools/make_clip_pipeline.py) is not set")
class ClipTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.clip = mminfer.CLIP(CLIP_DIR, threads=2)
        with open(os.path.join(CLIP_DIR, "reference", "expected.json"), encoding="utf-8") as f:
            cls.expected = json.load(f)
        cls.images = [os.path.join(CLIP_DIR, "reference", e["file"]) for e in cls.expected["images"]]

    def check_unit_rows(self, e, n):
        self.assertIsInstance(e, np.ndarray)
        self.assertEqual(e.dtype, np.float32)
        self.assertEqual(e.ndim, 2)
        self.assertEqual(e.shape[0], n)
        self.assertGreater(e.shape[1], 0)
        np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-4)

    def test_towers(self):
        self.assertEqual(self.clip.type, "clip")
        self.assertTrue(self.clip.has_images and self.clip.has_texts)
        self.assertFalse(self.clip.has_audio)
        self.assertIsInstance(self.clip, mminfer.Embedder)

    def test_texts_match_torch(self):
        texts = [t["text"] for t in self.expected["texts"]]
        e = self.clip.embed_texts(texts)
        self.check_unit_rows(e, len(texts))
        self.assertEqual(e.shape[1], len(self.expected["texts"][0]["embedding"]))
        for row, ref in zip(e, self.expected["texts"]):
            self.assertGreater(cosine(row, ref["embedding"]), 0.9999, ref["text"])
        one = self.clip.embed_texts(texts[0])  # one text: one row
        np.testing.assert_allclose(one[0], e[0], atol=1e-5)

    def test_images_match_torch(self):
        e = self.clip.embed_images(self.images)
        self.check_unit_rows(e, len(self.images))
        for row, ref in zip(e, self.expected["images"]):
            self.assertGreater(cosine(row, ref["embedding"]), 0.9999, ref["file"])
        with open(self.images[0], "rb") as f:
            data = f.read()
        for item in (data, bytearray(data), pathlib.Path(self.images[0])):
            np.testing.assert_array_equal(self.clip.embed_images([item])[0], e[0])

    @unittest.skipUnless(MMINFER_BIN, "MMINFER_BIN (the mminfer command line) is not set")
    def test_equal_to_cli(self):
        cmd = [MMINFER_BIN, "embed", "--pipeline", CLIP_DIR, "--jsonl", "--threads", "2"]
        for t in TEXTS:
            cmd += ["--text", t]
        for p in self.images:
            cmd += ["--image", p]
        proc = subprocess.run(cmd, capture_output=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr.decode(errors="replace"))
        rows = [json.loads(line) for line in proc.stdout.decode().splitlines() if line.strip()]
        self.assertEqual(len(rows), len(TEXTS) + len(self.images))
        mine = np.concatenate([self.clip.embed_texts(TEXTS), self.clip.embed_images(self.images)])
        for got, row in zip(mine, rows):
            self.assertEqual(len(got), len(row["embedding"]))
            self.assertGreater(cosine(got, row["embedding"]), 0.9999, row["input"])

    def test_classify(self):
        case = next(c for c in self.expected["classify"] if not c["from_manifest"])
        for result in case["results"]:
            path = os.path.join(CLIP_DIR, "reference", result["file"])
            got = self.clip.classify(path, case["labels"], case["templates"])
            self.assertEqual(sorted(label for label, _ in got), sorted(case["labels"]))
            probs = [p for _, p in got]
            self.assertEqual(probs, sorted(probs, reverse=True))
            self.assertAlmostEqual(sum(probs), 1.0, places=4)
            for label, p in got:
                self.assertAlmostEqual(p, result["probs"][label], delta=1e-4)
        manifest = next(c for c in self.expected["classify"] if c["from_manifest"])
        got = dict(self.clip.classify(self.images[0], manifest["labels"]))  # the folder's templates
        for label, p in manifest["results"][0]["probs"].items():
            self.assertAlmostEqual(got[label], p, delta=1e-4)

    def test_errors(self):
        with self.assertRaisesRegex(mminfer.Error, "image 1"):
            self.clip.embed_images([self.images[0], b"not an image"])
        with self.assertRaises(mminfer.Error):
            self.clip.embed_audio([b"RIFF"])
        with self.assertRaises(TypeError):
            self.clip.embed_images([np.zeros((4, 4, 3), np.uint8)])
        with self.assertRaises(FileNotFoundError):
            self.clip.embed_images(os.path.join(CLIP_DIR, "no-such-image.png"))
        with self.assertRaises(ValueError):
            mminfer.CLIP(CLIP_DIR, precision="int7")
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(mminfer.Error):
                mminfer.CLIP(d)


def text_image(text, size=(520, 110)):
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", size, "white")
    ImageDraw.Draw(img).text((20, 20), text, fill="black", font=ImageFont.truetype(FONT, 56))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


@unittest.skipUnless(PPOCR_DIR, "MMINFER_PPOCR_DIR (the PP-OCRv4 models) is not set")
class OcrTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ocr = mminfer.OCR(PPOCR_DIR, threads=2)
        cls.hello = text_image("HELLO 123")

    @staticmethod
    def joined(lines):
        return "".join(line["text"] for line in lines).replace(" ", "").upper()

    def test_reads_rendered_text(self):
        lines = self.ocr.read(self.hello)
        self.assertIn("HELLO123", self.joined(lines), lines)
        for line in lines:
            self.assertEqual(set(line), {"text", "score", "box"})
            self.assertGreater(line["score"], 0.5)
            self.assertEqual(len(line["box"]), 4)
            for x, y in line["box"]:
                self.assertTrue(-2 <= x <= 522 and -2 <= y <= 112, line["box"])

    def test_path_and_many(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "hello.png")
            with open(path, "wb") as f:
                f.write(self.hello)
            from_path = self.ocr.read(path)
        self.assertEqual(from_path, self.ocr.read(self.hello))
        many = self.ocr.read_many([self.hello, text_image("WORLD 456")])
        self.assertEqual(len(many), 2)
        self.assertIn("HELLO123", self.joined(many[0]))
        self.assertIn("WORLD456", self.joined(many[1]))

    def test_bad_image(self):
        with self.assertRaisesRegex(mminfer.Error, "image"):
            self.ocr.read(b"\x89PNG but not really")
        with self.assertRaisesRegex(mminfer.Error, "image 1"):
            self.ocr.read_many([self.hello, b"garbage"])
        with self.assertRaises(TypeError):
            self.ocr.read(12)


if __name__ == "__main__":
    unittest.main()
