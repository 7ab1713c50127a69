#!/usr/bin/python3
"""Checks `mminfer prune` (heads and MLP channels) on the transformer encoders of
tools/reference_models.py: CLIP-shaped vision (QuickGELU) and text (causal mask) towers, BERT
(post-LN, padding mask, GELU) and a Whisper-shaped audio encoder.

  check_prune.py WORK --mminfer BIN [--node NODE]

For each model:
  - dropped only (--no-reconstruct): the pruned file computes exactly what the original computes
    with the removed heads' rows of the output projection and the removed channels' rows of the
    down projection set to zero (ONNX Runtime on that masked original), in mminfer and in
    ONNX Runtime, within 1e-4;
  - refitted: every pruned block's output projection equals numpy's least-squares fit (with the
    bias as intercept) over the calibration activations, which ONNX Runtime computes on the
    original, or, where the calibration rows are fewer than twice the kept channels, keeps its
    rows and takes the removed channels' mean into its bias; the refit never raises a block's
    error; mminfer and ONNX Runtime agree on the file;
  - the MatMul FLOPs executed (a profile of one run) fall by what prune predicted, within 10%;
  - low rank: each projection's reported error is the optimum at its rank (the tail of the singular
    values of X W on the calibration rows), within the bound at the lowest such rank; the factors in
    the file make that error; FLOPs fall as predicted; mminfer and ONNX Runtime agree on the file;
  - a share that rounds to no unit leaves the outputs as they were.
On a cross-attention layer (queries from one input, keys and values from another, as a decoder
reads encoder states), low rank considers the projections of that model input and holds to the
same checks.
And the errors: a share outside [0, 1), a modality the model is not, a model without attention.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
from output_compare import errors, load_output, run_mminfer, run_tool, verdict  # noqa: E402
from profile_work import trace_matmul_flops  # noqa: E402
import reference_models  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402
import torch  # noqa: E402

SAMPLES = 12


class CrossAttention(torch.nn.Module):
    """A decoder layer's cross-attention and MLP: queries from x, keys and values from `memory`
    (a model input, as encoder states are to a decoder), so low rank must calibrate an input."""

    def __init__(self, d=32, heads=4, f=64):
        super().__init__()
        self.heads = heads
        self.ln, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))
        self.up, self.down = torch.nn.Linear(d, f), torch.nn.Linear(f, d)

    def forward(self, x, memory):
        b, t, d = x.shape
        s, h = memory.shape[1], self.heads
        q = self.q(self.ln(x)).reshape(b, t, h, d // h).transpose(1, 2)
        k = self.k(memory).reshape(b, s, h, d // h).transpose(1, 2)
        v = self.v(memory).reshape(b, s, h, d // h).transpose(1, 2)
        a = torch.softmax(q @ k.transpose(-1, -2) * (d // h) ** -0.5, dim=-1) @ v
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln2(x))))


def cross_attention(seed):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 2)
    cases = [("batch2", {"x": torch.randn(2, 7, 32, generator=g), "memory": torch.randn(2, 11, 32, generator=g)})]
    spec = dict(outputs=["y"], dynamic_axes={"x": {0: "batch", 1: "tokens"}, "memory": {0: "batch", 1: "frames"},
                                             "y": {0: "batch", 1: "tokens"}})
    return CrossAttention().eval(), cases, spec


LOCAL_MODELS = {"cross_attention": (cross_attention, 505)}


def export(name, work):
    builder, seed = reference_models.MODELS[name] if name in reference_models.MODELS else LOCAL_MODELS[name]
    model, cases, spec = builder(seed)
    feeds = cases[0][1]
    path = os.path.join(work, name + ".onnx")
    with torch.no_grad():
        torch.onnx.export(model, tuple(feeds.values()), path, input_names=list(feeds), output_names=spec["outputs"],
                          dynamic_axes=spec["dynamic_axes"], opset_version=17)
    return path, cases


def calibration_set(name, cases, work, seed):
    """SAMPLES folders of INPUT.npy, batch 1, shaped like the model's first case."""
    g = torch.Generator().manual_seed(seed)
    first = cases[0][1]
    root = os.path.join(work, name + "_calib")
    samples = []
    for i in range(SAMPLES):
        feed = {}
        for k, v in first.items():
            one = v[:1]
            if name == "cross_attention" and k == "memory":  # encoder states spanning 4 directions
                basis = torch.randn(4, one.shape[-1], generator=torch.Generator().manual_seed(99))  # one for all
                states = torch.randn(*one.shape[:-1], 4, generator=g) @ basis + 0.01 * torch.randn(one.shape, generator=g)
                feed[k] = states.numpy().astype(np.float32)
            elif v.dtype.is_floating_point:
                feed[k] = torch.randn(one.shape, generator=g).numpy().astype(np.float32)
            elif k == "input_ids":
                ids = torch.randint(1, 99, one.shape, generator=g)
                ids[0, -1] = 99 if name == "clip_text" else ids[0, -1]
                feed[k] = ids.numpy().astype(np.int64)
            elif k == "token_type_ids":
                feed[k] = torch.randint(0, 2, one.shape, generator=g).numpy().astype(np.int64)
            else:  # attention_mask: every token
                feed[k] = np.ones(one.shape, dtype=np.int64)
        d = os.path.join(root, f"{i:02d}")
        os.makedirs(d, exist_ok=True)
        files = {}
        for k, a in feed.items():
            files[k] = os.path.join(d, k + ".npy")
            np.save(files[k], a)
        samples.append(files)
    return root, samples


def ort_outputs(node, model, files, out_dir):
    cmd = [node, os.path.join(HERE, "ort_run.js"), model, "--output-dir", out_dir]
    cmd += [x for k, f in files.items() for x in ("--input", f"{k}={f}")]
    run_tool(cmd, "ort_run.js")


def prune(mminfer, model, out, calib, extra):
    cmd = [mminfer, "prune", model, "-o", out, "--calib", calib, "--quiet", "--report", out + ".json"] + extra
    run_tool(cmd, "mminfer prune")
    with open(out + ".json") as f:
        return json.load(f)


def weights(path):
    m = onnx.load(path)
    return m, {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


def fitted(samples):
    """The samples prune fits on: from 12 on, it holds the first 4 out to compare outputs."""
    return samples[4:] if len(samples) >= 12 else samples


def masked_original(src, report, dst):
    """The original with the removed units' rows of each output projection set to zero."""
    m = onnx.load(src)
    inits = {t.name: t for t in m.graph.initializer}
    for b in report["blocks"]:
        t = inits[b["output_weight"]]
        w = numpy_helper.to_array(t).copy()
        width = w.shape[0] // b["units"]
        for u in b["removed"]:
            w[u * width:(u + 1) * width, :] = 0
        t.CopyFrom(numpy_helper.from_array(w, t.name))
    onnx.save(m, dst)


def activations(node, src, names, samples, work):
    """ONNX Runtime's values of `names` on every calibration sample, rows stacked: {name: [rows, C]}."""
    m = onnx.load(src)
    inputs = {i.name for i in m.graph.input}
    for n in names:
        if n not in inputs:  # a model input is read from the sample itself
            m.graph.output.append(helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None))
    probe = os.path.join(work, "probe.onnx")
    onnx.save(m, probe)
    rows = {n: [] for n in names}
    for i, files in enumerate(samples):
        d = os.path.join(work, f"probe_{i}")
        ort_outputs(node, probe, files, d)
        for n in names:
            a = np.load(files[n]) if n in inputs else load_output(d, n)
            rows[n].append(a.reshape(-1, a.shape[-1]).astype(np.float64))
    return {n: np.concatenate(v) for n, v in rows.items()}


def matmul_flops(mminfer, path, files, work):
    """MatMul FLOPs of one run at the shapes really executed: a profile of mminfer at opt-level 0,
    where each MatMul of the file is one event."""
    trace = os.path.join(work, os.path.basename(path) + ".trace.json")
    cmd = [mminfer, "bench", path, "--opt-level", "0", "--profile", trace, "--runs", "1", "--warmup", "0", "--quiet"]
    cmd += [x for k, f in files.items() for x in ("--input", f"{k}={f}")]
    run_tool(cmd, "mminfer bench --profile")
    total = trace_matmul_flops(trace)
    if total == 0:
        raise RuntimeError(f"no MatMul in the profile of {path}")
    return total


def mminfer_vs_ort(args, failures, model, probe_files, work, tag, outputs, label):
    """Runs `model` in ONNX Runtime and in mminfer on the probes and compares every output."""
    ort_outputs(args.node, model, probe_files, os.path.join(work, f"ort_{tag}"))
    run_mminfer(args.mminfer, model, probe_files, os.path.join(work, f"mm_{tag}"))
    for o in outputs:
        compare(failures, f"{label} {o}: mminfer vs ONNX Runtime", load_output(os.path.join(work, f"mm_{tag}"), o),
                load_output(os.path.join(work, f"ort_{tag}"), o))


def compare(failures, label, actual, expected, rtol=1e-4):
    try:
        _, rel = errors(actual, expected)
    except RuntimeError as e:
        failures.append(f"{label}: {e}")
        return
    ok = rel <= rtol
    print(f"{'ok  ' if ok else 'FAIL'} {label}: relative error {rel:.3g}")
    if not ok:
        failures.append(f"{label}: relative error {rel:.3g} > {rtol:g}")


def check_low_rank(name, args, src, calib, samples, outputs, orig_w, work, failures):
    """Low rank on `src`: each projection's reported error is the optimum at its rank (the tail of
    the singular values of X W over the calibration rows), within the bound at the lowest such
    rank; the factors make that error; FLOPs fall as predicted; mminfer and ONNX Runtime agree.
    Returns prune's report."""
    probe_files = samples[0]
    factored = os.path.join(work, "low_rank.onnx")
    bound = 0.05
    rep = prune(args.mminfer, src, factored, calib, ["--low-rank", str(bound)])
    acts = activations(args.node, src, sorted({c["input"] for c in rep["factored"]}), fitted(samples), work)
    _, low_w = weights(factored)
    for c in rep["factored"]:
        x, w = acts[c["input"]], orig_w[c["weight"]].astype(np.float64)
        s = np.linalg.svd(x @ w, compute_uv=False)
        energy = s ** 2
        tail = lambda r: float(energy[r:].sum() / energy.sum())  # noqa: E731
        label = f"{name} low rank {c['weight']} ({c['rows']}x{c['cols']}, rank {c['rank']})"
        problems = []
        if abs(c["error"] - tail(c["rank"])) > 1e-4:
            problems.append(f"reported error {c['error']:.5f}, optimum {tail(c['rank']):.5f}")
        if c["error"] > bound or (c["rank"] > 1 and tail(c["rank"] - 1) <= bound):
            problems.append(f"rank {c['rank']} is not the lowest within {bound}")
        if c["factored"]:
            a = low_w[c["weight"] + "_low_rank_a"].astype(np.float64)
            b = low_w[c["weight"] + "_low_rank_b"].astype(np.float64)
            actual = float(np.linalg.norm(x @ w - x @ a @ b) ** 2 / np.linalg.norm(x @ w) ** 2)
            if abs(actual - c["error"]) > 1e-4:
                problems.append(f"the factors' error {actual:.5f}, reported {c['error']:.5f}")
            if c["rank"] * (c["rows"] + c["cols"]) > 0.8 * c["rows"] * c["cols"]:
                problems.append("factored where it does not pay")
        print(f"{'ok  ' if not problems else 'FAIL'} {label}: error {c['error']:.4f}, factored {c['factored']}"
              + ("" if not problems else ": " + "; ".join(problems)))
        failures += [f"{label}: {p}" for p in problems]
    if not any(c["factored"] for c in rep["factored"]):
        print(f"note {name}: no projection factored within {bound}")
    mminfer_vs_ort(args, failures, factored, probe_files, work, "low_rank", outputs, f"{name} low rank")
    before, after = matmul_flops(args.mminfer, src, probe_files, work), matmul_flops(args.mminfer, factored, probe_files, work)
    predicted = sum(c["flops_before"] - c["flops_after"] for c in rep["factored"])
    ok = abs((before - after) - predicted) <= 0.1 * max(predicted, 1)
    print(f"{'ok  ' if ok else 'FAIL'} {name} low rank FLOPs fall {before - after:.0f}, predicted {predicted:.0f}")
    if not ok:
        failures.append(f"{name}: low rank FLOPs fell by {before - after:.0f}, predicted {predicted:.0f}")
    return rep


def check_model(name, args, failures):
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    src, cases = export(name, work)
    calib, samples = calibration_set(name, cases, work, 7)
    outputs = [o.name for o in onnx.load(src).graph.output]
    probe_files = samples[0]

    # Dropped only: the masked original, exactly.
    dropped = os.path.join(work, "dropped.onnx")
    rep = prune(args.mminfer, src, dropped, calib, ["--heads", "0.5", "--mlp", "0.5", "--no-reconstruct"])
    kinds = {b["kind"] for b in rep["blocks"] if b["removed"]}
    if kinds != {"attention", "mlp"}:
        failures.append(f"{name}: pruned {sorted(kinds)}, expected attention and mlp blocks")
    masked = os.path.join(work, "masked.onnx")
    masked_original(src, rep, masked)
    ort_outputs(args.node, masked, probe_files, os.path.join(work, "ort_masked"))
    ort_outputs(args.node, dropped, probe_files, os.path.join(work, "ort_dropped"))
    run_mminfer(args.mminfer, dropped, probe_files, os.path.join(work, "mm_dropped"))
    for o in outputs:
        want = load_output(os.path.join(work, "ort_masked"), o)
        compare(failures, f"{name} dropped {o}: mminfer vs the masked original",
                load_output(os.path.join(work, "mm_dropped"), o), want)
        compare(failures, f"{name} dropped {o}: ONNX Runtime vs the masked original",
                load_output(os.path.join(work, "ort_dropped"), o), want)

    # Refitted: numpy's least squares over the calibration activations.
    refit = os.path.join(work, "refit.onnx")
    rep = prune(args.mminfer, src, refit, calib, ["--heads", "0.5", "--mlp", "0.5"])
    _, orig_w = weights(src)
    _, new_w = weights(refit)
    acts = activations(args.node, src, [b["input"] for b in rep["blocks"]], fitted(samples), work)
    for b in rep["blocks"]:
        if not b["removed"]:
            continue
        if b["error"] > b["error_dropped"] * (1 + 1e-9):
            failures.append(f"{name} {b['output_weight']}: refit error {b['error']:.3g} above dropping's {b['error_dropped']:.3g}")
        x = acts[b["input"]]
        w = orig_w[b["output_weight"]].astype(np.float64)
        bias = orig_w[b["output_bias"]].astype(np.float64) if b["output_bias"] else np.zeros(w.shape[1])
        width = w.shape[0] // b["units"]
        keep = [c for u in range(b["units"]) if u not in b["removed"] for c in range(u * width, (u + 1) * width)]
        target = x @ w + bias
        if b["refit"] == "mean into bias":  # too few calibration rows for least squares
            removed = [c for u in b["removed"] for c in range(u * width, (u + 1) * width)]
            moved = bias + x[:, removed].mean(axis=0) @ w[removed]
            got_w = new_w[b["written_weight"]].astype(np.float64)
            got_b = new_w[b["written_bias"]].reshape(-1).astype(np.float64) if b["output_bias"] else moved
            err = max(float(np.abs(got_w - w[keep]).max()), float(np.abs(got_b - moved).max()) / max(np.abs(moved).max(), 1e-30))
            ok = err <= 1e-5
            print(f"{'ok  ' if ok else 'FAIL'} {name} {b['kind']} {b['output_weight']}: rows kept, removed mean in the bias "
                  f"({err:.3g}), error {b['error_dropped']:.4f} -> {b['error']:.4f}")
            if not ok:
                failures.append(f"{name} {b['output_weight']}: the mean-into-bias refit differs by {err:.3g}")
            continue
        design = np.concatenate([x[:, keep], np.ones((x.shape[0], 1))], axis=1) if b["output_bias"] else x[:, keep]
        sol, *_ = np.linalg.lstsq(design, target, rcond=None)
        # Compared by what the fits compute on the calibration rows: where the kept channels are
        # nearly dependent, different weights fit equally well.
        got = new_w[b["written_weight"]].astype(np.float64)
        if b["output_bias"]:
            got = np.concatenate([got, new_w[b["written_bias"]].reshape(1, -1).astype(np.float64)])
        scale = max(np.linalg.norm(target), 1e-30)
        err = float(np.linalg.norm(design @ got - design @ sol) / scale)
        ok = err <= 1e-4
        print(f"{'ok  ' if ok else 'FAIL'} {name} {b['kind']} {b['output_weight']}: refit vs numpy lstsq {err:.3g}, "
              f"error {b['error_dropped']:.4f} -> {b['error']:.4f}")
        if not ok:
            failures.append(f"{name} {b['output_weight']}: refit differs from numpy's least squares by {err:.3g}")
    mminfer_vs_ort(args, failures, refit, probe_files, work, "refit", outputs, f"{name} refitted")

    # FLOPs: what shape inference counts falls by the predicted amount.
    before, after = matmul_flops(args.mminfer, src, probe_files, work), matmul_flops(args.mminfer, refit, probe_files, work)
    predicted = sum(b["flops_before"] - b["flops_after"] for b in rep["blocks"])
    ratio = (before - after) / predicted if predicted else 0
    ok = abs(ratio - 1) <= 0.1
    print(f"{'ok  ' if ok else 'FAIL'} {name} FLOPs {before / 1e6:.3f} -> {after / 1e6:.3f} M, fall {before - after:.0f}, "
          f"predicted {predicted:.0f} (x{ratio:.3f})")
    if not ok:
        failures.append(f"{name}: FLOPs fell by {before - after:.0f}, predicted {predicted:.0f}")

    check_low_rank(name, args, src, calib, samples, outputs, orig_w, work, failures)

    # Nothing removed: the same outputs.
    same = os.path.join(work, "same.onnx")
    rep = prune(args.mminfer, src, same, calib, ["--heads", "0.01", "--mlp", "0.001"])
    if any(b["removed"] for b in rep["blocks"]):
        failures.append(f"{name}: a share rounding to no unit removed some")
    run_mminfer(args.mminfer, src, probe_files, os.path.join(work, "mm_src"))
    run_mminfer(args.mminfer, same, probe_files, os.path.join(work, "mm_same"))
    for o in outputs:
        compare(failures, f"{name} nothing removed {o}", load_output(os.path.join(work, "mm_same"), o),
                load_output(os.path.join(work, "mm_src"), o), rtol=1e-6)
    return src, calib


def expect_error(args, failures, cmd, needle):
    proc = subprocess.run([args.mminfer, "prune"] + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ok = proc.returncode == 1 and needle in proc.stderr and proc.stderr.count("\n") == 1
    print(f"{'ok  ' if ok else 'FAIL'} error '{needle}': exit {proc.returncode}: {proc.stderr.strip()}")
    if not ok:
        failures.append(f"prune {' '.join(cmd)}: exit {proc.returncode}, stderr {proc.stderr.strip()!r}")


def check_cross_attention(args, failures):
    """Low rank on a cross-attention layer: the keys' and values' projections read a model input
    (the encoder states), which calibration observes like any activation; the states span 4
    directions, so both factor at a low rank."""
    name = "cross_attention"
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    src, cases = export(name, work)
    calib, samples = calibration_set(name, cases, work, 7)
    outputs = [o.name for o in onnx.load(src).graph.output]
    _, orig_w = weights(src)
    rep = check_low_rank(name, args, src, calib, samples, outputs, orig_w, work, failures)
    from_input = [c for c in rep["factored"] if c["input"] == "memory"]
    ok = len(from_input) == 2 and all(c["factored"] for c in from_input)
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {len(from_input)} projections of the model input 'memory' considered, "
          f"ranks {[c['rank'] for c in from_input]}, factored {[c['factored'] for c in from_input]}")
    if not ok:
        failures.append(f"{name}: the keys' and values' projections of 'memory' were not both factored: {from_input}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("work")
    p.add_argument("--mminfer", required=True)
    p.add_argument("--node", default="node")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failures = []
    made = {}
    for name in ("clip_vision", "clip_text", "bert", "whisper_encoder"):
        try:
            made[name] = check_model(name, args, failures)
        except RuntimeError as e:
            failures.append(f"{name}: {e}")
    try:
        check_cross_attention(args, failures)
    except RuntimeError as e:
        failures.append(f"cross_attention: {e}")
    if "clip_vision" in made:
        src, calib = made["clip_vision"]
        out = os.path.join(args.work, "never.onnx")
        expect_error(args, failures, [src, "-o", out, "--calib", calib, "--heads", "1"], "not a share in [0, 1)")
        expect_error(args, failures, [src, "-o", out, "--calib", calib, "--heads", "text=0.5"], "nothing to remove")
        expect_error(args, failures, [src, "-o", out, "--calib", calib, "--heads", "sound=0.5"], "unknown modality")
        conv = os.path.join(args.work, "conv.onnx")
        x = helper.make_tensor_value_info("pixel_values", onnx.TensorProto.FLOAT, [1, 3, 8, 8])
        y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
        w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
        g = helper.make_graph([helper.make_node("Conv", ["pixel_values", "w"], ["y"])], "conv", [x], [y], [w])
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), conv)
        expect_error(args, failures, [conv, "-o", out, "--calib", calib, "--heads", "0.5"], "no attention or MLP block")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
