"""What the command-line checks of tests/generate share: their arguments, running a command, one
ok/FAIL line per check and a summary that becomes the exit status."""
import argparse
import os
import subprocess


class Checks:
    def __init__(self):
        self.failures = []

    def __call__(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            self.failures.append(what)

    def summary(self):
        print(f"{len(self.failures)} failures")
        return 1 if self.failures else 0


def arguments(model_flag="--model"):
    """--mminfer BIN, the model folder (or folders) flag, and --work DIR (made if absent)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--mminfer", required=True)
    ap.add_argument(model_flag, required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    return a


def mminfer(binary, command, *args, timeout=300):
    """Runs `mminfer COMMAND ARGS...`: (exit status, stdout, stderr)."""
    p = subprocess.run([binary, command, *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr
