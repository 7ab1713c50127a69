#!/usr/bin/python3
"""Early exit through a staged pipeline, on a classifier trained here in seconds.

  check_early_exit.py --mminfer BIN [--keep DIR]

The task: 16x16 scenes whose quadrants are each bright or dark, under noise of a random strength;
the class is the parity of the bright quadrants and whether the first is bright. The model: a shallow encoder (two layers), an exit head on
it, and a deeper stage (two more layers and a head) on the same features, trained together
(400 steps, one thread, fixed seeds). The folder: the encoder, the exit head (argmax), and the
deep stage gated on the exit head's confidence, taking the exit head's answer where it is sure
("default": "exit"). Checked against torch on 600 held-out scenes at a bound in the middle of
the exit head's confidences: each answer is the deep stage's where the exit head is below the
bound and the exit head's elsewhere; the deep stage runs on exactly those inputs. Printed: the
accuracy of the exit head alone, of the full model, and of the cascade at several bounds, with
the share of inputs the deep stage ran on.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

SIZE, CLASSES, WIDTH = 16, 4, 48


def scenes(rng, n):
    """Each quadrant bright or dark at random; the class is 2 x (the parity of the four) + whether
    the top-left one is bright: a rule one layer of features reads badly and two more read well."""
    x = rng.normal(0, 1, size=(n, 3, SIZE, SIZE)).astype(np.float32)
    x *= rng.uniform(0.3, 1.5, size=n).astype(np.float32)[:, None, None, None]
    bits = rng.integers(0, 2, size=(n, 4))
    for q in range(4):
        r0, c0 = (q // 2) * 8, (q % 2) * 8
        x[:, :, r0:r0 + 8, c0:c0 + 8] += 0.8 * bits[:, q, None, None, None]
    y = 2 * (bits.sum(1) % 2) + bits[:, 0]
    return x, y


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * SIZE * SIZE, WIDTH), torch.nn.GELU())

    def forward(self, x):
        return self.net(x)


class Deep(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(WIDTH, 128), torch.nn.GELU(), torch.nn.Linear(128, 128), torch.nn.GELU(),
                                       torch.nn.Linear(128, CLASSES))

    def forward(self, h):
        return self.net(h)


def train():
    """The encoder and deep stage first, then the exit head alone on the frozen features (a probe
    of the shallow layers, as early exits are fitted to a trained network)."""
    torch.manual_seed(20261205)
    torch.set_num_threads(1)
    rng = np.random.default_rng(1)
    enc, exit_head, deep = Encoder(), torch.nn.Linear(WIDTH, CLASSES), Deep()
    for params, loss_of, steps in ((list(enc.parameters()) + list(deep.parameters()), lambda h, y: deep(h), 500),
                                   (list(exit_head.parameters()), lambda h, y: exit_head(h.detach()), 300)):
        opt = torch.optim.Adam(params, lr=2e-3)
        for _ in range(steps):
            x, y = scenes(rng, 128)
            x, y = torch.from_numpy(x), torch.from_numpy(y)
            loss = torch.nn.functional.cross_entropy(loss_of(enc(x), y), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return enc.eval(), exit_head.eval(), deep.eval()


def export(module, example, path, inputs, outputs):
    torch.onnx.export(module, (example,), path, input_names=inputs, output_names=outputs,
                      dynamic_axes={n: {0: "batch"} for n in inputs + outputs}, opset_version=17, do_constant_folding=True)


def run(mminfer, folder, files):
    p = subprocess.run([mminfer, "staged", "--pipeline", folder, "--json", "--threads", "1"] + files,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip()[:400])
    return json.loads(p.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mminfer", required=True)
    p.add_argument("--keep")
    args = p.parse_args()
    root = args.keep or tempfile.mkdtemp(prefix="early-exit-")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "inputs"))
    enc, exit_head, deep = train()
    models = os.path.join(root, "models")
    os.makedirs(models)
    export(enc, torch.zeros(2, 3, SIZE, SIZE), os.path.join(models, "encoder.onnx"), ["pixels"], ["hidden"])
    export(exit_head, torch.zeros(2, WIDTH), os.path.join(models, "exit.onnx"), ["hidden"], ["logits"])
    export(deep, torch.zeros(2, WIDTH), os.path.join(models, "deep.onnx"), ["hidden"], ["logits"])

    x, y = scenes(np.random.default_rng(2), 600)
    files = []
    for i in range(len(x)):
        files.append(os.path.join(root, "inputs", f"{i:04d}.npy"))
        np.save(files[-1], x[i])
    with torch.no_grad():
        h = enc(torch.from_numpy(x))
        p_exit = torch.softmax(exit_head(h).double(), -1)
        exit_pred, exit_sure = p_exit.argmax(-1).numpy(), p_exit.max(-1).values.numpy()
        deep_pred = deep(h).argmax(-1).numpy()

    def folder(bound):
        d = os.path.join(root, f"bound-{bound}")
        shutil.copytree(models, d, dirs_exist_ok=True)
        late = {"name": "deep", "inputs": {"hidden": "encoder.hidden"}, "select": "argmax"}
        if bound is not None:
            late["gate"] = {"stage": "exit", "confidence": bound, "default": "exit"}
        doc = {"type": "staged", "files": {"encoder": "encoder.onnx", "exit": "exit.onnx", "deep": "deep.onnx"},
               "stages": [{"name": "exit", "inputs": {"hidden": "encoder.hidden"}, "select": "argmax"}, late]}
        with open(os.path.join(d, "pipeline.json"), "w") as f:
            json.dump(doc, f)
        return d

    failures = []
    # A bound between two neighbouring confidences near the median, clear of both.
    s = np.sort(exit_sure)
    gaps = [j for j in range(1, len(s)) if s[j] - s[j - 1] > 2e-4]
    mid = min(gaps, key=lambda j: abs(j - len(s) // 2))
    bound = float((s[mid] + s[mid - 1]) / 2)
    got = run(args.mminfer, folder(bound), files)
    answers = np.array([r["stages"]["deep"]["result"] for r in got["results"]])
    deep_ran = np.array([r["stages"]["deep"]["ran"] for r in got["results"]])
    want_ran = exit_sure < bound
    want = np.where(want_ran, deep_pred, exit_pred)
    if not (deep_ran == want_ran).all():
        failures.append(f"the deep stage ran on {int(deep_ran.sum())} inputs, torch's rule says {int(want_ran.sum())}; "
                        f"{int((deep_ran != want_ran).sum())} differ")
    if not (answers == want).all():
        failures.append(f"{int((answers != want).sum())} answers differ from torch's cascade")
    exit_answers = np.array([r["stages"]["exit"]["result"] for r in got["results"]])
    if not (exit_answers == exit_pred).all():
        failures.append("the exit head's answers differ from torch's")
    work = {w["model"]: (w["ran"], w["skipped"]) for w in got["work"]}
    if work.get("deep") != (int(want_ran.sum()), int((~want_ran).sum())) or work.get("encoder") != (len(x), 0):
        failures.append(f"work report {work}")
    print(f"bound {bound:.4f}: the deep stage ran on {int(want_ran.sum())} of {len(x)} scenes; answers equal torch's; "
          f"accuracy {np.mean(answers == y):.4f}; ms: " + ", ".join(f"{w['model']} {w['ms']:.1f}" for w in got["work"]))

    # Accuracy at several bounds (the rule checked above; torch's numbers).
    print(f"exit head alone: accuracy {np.mean(exit_pred == y):.4f}; full model: {np.mean(deep_pred == y):.4f}")
    for b in (0.5, 0.7, 0.9, 0.99):
        ran = exit_sure < b
        acc = np.mean(np.where(ran, deep_pred, exit_pred) == y)
        print(f"  bound {b}: deep stage on {ran.mean():.1%} of scenes, accuracy {acc:.4f}")
    if np.mean(deep_pred == y) < 0.7:
        failures.append(f"the full model's accuracy {np.mean(deep_pred == y):.3f}: training did not work")

    # A default naming a later stage, or a stage of the other kind, is refused.
    bad = folder(0.5)
    doc = json.load(open(os.path.join(bad, "pipeline.json")))
    doc["stages"][1]["gate"]["default"] = "nothing"
    json.dump(doc, open(os.path.join(bad, "pipeline.json"), "w"))
    p = subprocess.run([args.mminfer, "staged", "--pipeline", bad, files[0]], capture_output=True, text=True)
    if p.returncode == 0 or "gate.default 'nothing' names no earlier stage" not in p.stderr:
        failures.append(f"a default naming no stage: {p.stderr.strip()[:200]}")

    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
