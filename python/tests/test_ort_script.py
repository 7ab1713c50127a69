"""An ONNX Runtime script runs on mminfer with only its import line changed."""
import os
import subprocess
import sys
import unittest

import helpers  # noqa: F401 - checks that mminfer imports

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "ort_style_script.py")


class OrtScriptTest(unittest.TestCase):
    def test_script_only_changes_the_import(self):
        with open(SCRIPT, encoding="utf-8") as f:
            lines = f.read().splitlines()
        self.assertEqual(lines[0], "import mminfer as onnxruntime")
        rest = "\n".join(lines[1:])
        self.assertNotIn("mminfer", rest, "the script must use onnxruntime's API only")

    def test_script_runs(self):
        proc = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        self.assertIn("ort_style_script: OK", proc.stdout)


if __name__ == "__main__":
    unittest.main()
