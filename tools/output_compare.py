"""Shared pieces of the reference checks: run `mminfer run`, load its outputs, measure errors."""
import os
import subprocess

import numpy as np

# Relative error of an output a against the reference b: max|a - b| / max(max|b|, TINY).
# One scale per output (its largest reference magnitude), so tiny reference entries do not blow
# the ratio up, and an all-zero reference still gives a finite number.
TINY = float(np.finfo(np.float32).tiny)


def file_safe(name):
    """The file name `mminfer run` and ort_run.js give an output."""
    s = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return "output" + s if s in ("", ".", "..") else s


def run_tool(cmd, what):
    """Runs a command; on failure raises with its stderr tail (one short, readable message)."""
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-3:]
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): " + " | ".join(tail))
    return proc.stdout


def verdict(failures):
    """Prints each failure and PASS or the count; the exit status for a check tool."""
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


def run_mminfer(mminfer, model, inputs, out_dir, threads=0, opt_level=None):
    """inputs: {name: path}; mminfer writes each output as out_dir/<file_safe(name)>.npy."""
    cmd = [mminfer, "run", model, "--output-dir", out_dir]
    for name, path in inputs.items():
        cmd += ["--input", f"{name}={path}"]
    if threads:
        cmd += ["--threads", str(threads)]
    if opt_level is not None:
        cmd += ["--opt-level", str(opt_level)]
    run_tool(cmd, "mminfer run")


def load_output(out_dir, name):
    path = os.path.join(out_dir, file_safe(name) + ".npy")
    if not os.path.isfile(path):
        raise RuntimeError(f"no output file for '{name}' in {out_dir}")
    return np.load(path)


def errors(actual, expected):
    """(max abs error, relative error as defined above); raises on shape/dtype mismatch or NaN."""
    if actual.shape != expected.shape:
        raise RuntimeError(f"shape {list(actual.shape)}, expected {list(expected.shape)}")
    if actual.dtype != expected.dtype:
        raise RuntimeError(f"dtype {actual.dtype}, expected {expected.dtype}")
    a, b = actual.astype(np.float64), expected.astype(np.float64)
    if np.isnan(a).any() != np.isnan(b).any() or not np.array_equal(np.isnan(a), np.isnan(b)):
        raise RuntimeError(f"{int(np.isnan(a).sum())} NaN values, reference has {int(np.isnan(b).sum())}")
    finite = ~np.isnan(b)
    if a.size == 0 or not finite.any():
        return 0.0, 0.0
    with np.errstate(invalid="ignore"):
        diff = np.abs(a[finite] - b[finite])
    diff[a[finite] == b[finite]] = 0.0  # equal infinities
    max_abs = float(diff.max())
    scale = float(np.abs(b[finite & np.isfinite(b)]).max(initial=0.0))
    return max_abs, max_abs / max(scale, TINY)
