"""The module's outputs equal, bit for bit, those of `mminfer run` on the same model and inputs
(MMINFER_BIN: the mminfer command line)."""
import os
import subprocess
import tempfile
import unittest

import numpy as np

import helpers
import mminfer

MMINFER_BIN = helpers.env_path("MMINFER_BIN")


@unittest.skipUnless(MMINFER_BIN, "MMINFER_BIN (the mminfer command line) is not set")
class CliEqualityTest(unittest.TestCase):
    def compare(self, model, feed):
        with tempfile.TemporaryDirectory() as d:
            path = helpers.save(model, d, "model.onnx")
            args = [MMINFER_BIN, "run", path, "--output-dir", os.path.join(d, "out")]
            for name, value in feed.items():
                np.save(os.path.join(d, f"{name}.npy"), value)
                args += ["--input", f"{name}={os.path.join(d, name + '.npy')}"]
            proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            sess = mminfer.InferenceSession(path)
            got = sess.run(None, feed)
            for out, value in zip(sess.get_outputs(), got):
                cli = np.load(os.path.join(d, "out", out.name + ".npy"))
                self.assertEqual(cli.dtype, value.dtype, out.name)
                self.assertEqual(cli.shape, value.shape, out.name)
                self.assertEqual(cli.tobytes(), value.tobytes(), f"output {out.name} differs from the CLI's")

    def test_mlp(self):
        model, _, _ = helpers.mlp(din=4, dout=8)
        self.compare(model, {"x": np.random.default_rng(0).standard_normal((7, 4)).astype(np.float32)})

    def test_heavy(self):
        x = np.random.default_rng(1).standard_normal((33, 256)).astype(np.float32)
        self.compare(helpers.heavy(n=256, layers=3), {"x": x})

    def test_typed(self):
        self.compare(helpers.typed_io(), helpers.typed_feed())


if __name__ == "__main__":
    unittest.main()
