#!/usr/bin/python3
"""Checks `mminfer staged` (a shared encoder, then gated stages) against torch.

  check_staged.py --mminfer BIN [--keep DIR]

Builds a small model in the shape of multi-stage decoding over one encoder, with random weights
and a fixed seed: a conv encoder giving per-token features and their mean; a topic head
(argmax over 6 topics, plus a topic embedding as a second output); a layout head reading the
pooled features and the topic (argmax over 4 layouts for each of 3 regions); a render head
attending over the tokens with a query made of the topic, the layouts and the topic embedding
(8 regression values). Torch runs the same flow with the same gates and defaults. Checked:
  - without gates every stage runs and its results equal torch's (indices exactly, values
    and confidences within 1e-4);
  - with gates at the middle of the observed confidences, each input skips exactly the stages
    torch skips, takes the default there, and every later stage reads that default; the work
    report counts the inputs each model ran on;
  - an image equals its normalized .npy; results do not depend on the batch;
  - sampling is reproducible by seed, differs across seeds, and follows softmax(logits / T);
  - bad folders and bad inputs get one-line errors naming the key or file.
"""
import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))

SIZE = 32
MEAN = [0.5, 0.4, 0.3]
STD = [0.25, 0.2, 0.3]
TOPICS, REGIONS, LAYOUTS, RENDER = 6, 3, 4, 8
WIDTH = 32


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = torch.nn.Conv2d(3, 16, 4, stride=4)
        self.norm = torch.nn.LayerNorm(16)
        self.proj = torch.nn.Linear(16, WIDTH)

    def forward(self, pixels):
        t = self.patch(pixels).flatten(2).transpose(1, 2)
        tokens = torch.nn.functional.gelu(self.proj(self.norm(t)))
        return tokens, tokens.mean(dim=1)


class Topic(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(WIDTH, TOPICS)
        self.embed = torch.nn.Linear(WIDTH, WIDTH)

    def forward(self, pooled):
        return 4.0 * self.head(pooled), torch.tanh(self.embed(pooled))


class Layout(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.topic = torch.nn.Embedding(TOPICS, WIDTH)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(WIDTH, 64), torch.nn.GELU(), torch.nn.Linear(64, REGIONS * LAYOUTS))

    def forward(self, pooled, topic):
        return 3.0 * self.mlp(pooled + self.topic(topic)).reshape(-1, REGIONS, LAYOUTS)


class Render(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.topic = torch.nn.Embedding(TOPICS, WIDTH)
        self.layout = torch.nn.Embedding(LAYOUTS, WIDTH)
        self.out = torch.nn.Linear(WIDTH, RENDER)

    def forward(self, tokens, topic, layout, topic_embedding):
        q = self.topic(topic) + self.layout(layout).sum(dim=1) + topic_embedding
        w = torch.softmax(torch.einsum("bd,btd->bt", q, tokens) / WIDTH ** 0.5, dim=-1)
        return self.out(torch.einsum("bt,btd->bd", w, tokens))


def export(module, args, path, inputs, outputs):
    dyn = {n: {0: "batch"} for n in inputs + outputs}
    torch.onnx.export(module, args, path, input_names=inputs, output_names=outputs, dynamic_axes=dyn,
                      opset_version=17, do_constant_folding=True)


def manifest(gates=None, layout_select="argmax", temperature=None):
    """The pipeline.json; gates maps a stage name to its gate object."""
    gates = gates or {}
    layout = {"name": "layout", "inputs": {"pooled": "encoder.pooled", "topic": "topic"}, "select": layout_select}
    if temperature is not None:
        layout["temperature"] = temperature
    stages = [
        {"name": "topic", "inputs": {"pooled": "encoder.pooled"}, "output": "logits", "select": "argmax"},
        layout,
        {"name": "render", "inputs": {"tokens": "encoder.tokens", "topic": "topic", "layout": "layout",
                                      "topic_embedding": "topic.embedding"}, "select": "value"},
    ]
    for s in stages:
        if s["name"] in gates:
            s["gate"] = gates[s["name"]]
    return {"type": "staged",
            "files": {"encoder": "encoder.onnx", "topic": "topic.onnx", "layout": "layout.onnx", "render": "render.onnx"},
            "preprocess": {"image_size": SIZE, "mean": MEAN, "std": STD},
            "stages": stages}


class Folder:
    """The ONNX files once; a pipeline folder per manifest variant (the files copied in)."""

    def __init__(self, root):
        self.root = root
        self.models = os.path.join(root, "models")
        os.makedirs(self.models)
        self.count = 0

    def with_manifest(self, doc):
        self.count += 1
        d = os.path.join(self.root, f"variant{self.count}")
        shutil.copytree(self.models, d)
        with open(os.path.join(d, "pipeline.json"), "w") as f:
            json.dump(doc, f)
        return d


def run(args, folder, files, extra=(), expect_ok=True):
    cmd = [args.mminfer, "staged", "--pipeline", folder, "--json", "--threads", "2"] + list(extra) + files
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if expect_ok and out.returncode != 0:
        raise RuntimeError(f"staged {' '.join(extra)}: {out.stderr.strip()}")
    return out


def results(out):
    return json.loads(out.stdout)


def reference(models, pixels, gate_layout=None, gate_render=None):
    """Torch's flow: per input, each stage's (ran, result, confidence)."""
    enc, topic_head, layout_head, render_head = models
    with torch.no_grad():
        tokens, pooled = enc(pixels)
        logits, embedding = topic_head(pooled)
        p = torch.softmax(logits.double(), -1)
        topic, topic_sure = p.argmax(-1), p.max(-1).values
        run_layout = torch.ones(len(pixels), dtype=torch.bool)
        if gate_layout is not None:
            run_layout = topic_sure < gate_layout["confidence"]
        lp = torch.softmax(layout_head(pooled, topic).double(), -1)
        layout = torch.where(run_layout[:, None], lp.argmax(-1), torch.tensor(gate_layout["default"] if gate_layout else [0] * REGIONS))
        layout_sure = lp.max(-1).values.min(-1).values
        run_render = torch.ones(len(pixels), dtype=torch.bool)
        if gate_render is not None:
            run_render = ~(run_layout & (layout_sure >= gate_render["confidence"]))
        values = render_head(tokens, topic, layout, embedding)
        if gate_render is not None:
            values = torch.where(run_render[:, None], values, torch.tensor(gate_render["default"], dtype=torch.float32))
    out = []
    for i in range(len(pixels)):
        out.append({
            "topic": (True, int(topic[i]), float(topic_sure[i])),
            "layout": (bool(run_layout[i]), layout[i].tolist(), float(layout_sure[i]) if run_layout[i] else None),
            "render": (bool(run_render[i]), values[i].tolist(), None),
        })
    return out, topic_sure.numpy(), layout_sure.numpy()


def compare(got, want, where, failures):
    for name, (ran, result, sure) in want.items():
        g = got["stages"][name]
        if g["ran"] != ran:
            failures.append(f"{where}: stage {name} ran={g['ran']}, torch ran={ran}")
            continue
        if name == "render":
            a, b = np.array(g["result"], dtype=np.float64), np.array(result, dtype=np.float64)
            if a.shape != b.shape or np.abs(a - b).max() > 1e-4 * max(1.0, np.abs(b).max()):
                failures.append(f"{where}: render {g['result']} vs torch {result}")
        elif g["result"] != result:
            failures.append(f"{where}: {name} {g['result']} vs torch {result}")
        if sure is not None and abs(g.get("confidence", -1) - sure) > 1e-4:
            failures.append(f"{where}: {name} confidence {g.get('confidence')} vs torch {sure}")
        if sure is None and "confidence" in g and name != "layout":
            failures.append(f"{where}: {name} reports a confidence though it gives values")


def same(a, b):
    """Two runs' stages alike: the same indices and flags, values and confidences within 1e-5."""
    if a.keys() != b.keys():
        return False
    for name in a:
        x, y = a[name], b[name]
        if x["ran"] != y["ran"] or ("confidence" in x) != ("confidence" in y):
            return False
        if "confidence" in x and abs(x["confidence"] - y["confidence"]) > 1e-5:
            return False
        u, v = np.array(x["result"]), np.array(y["result"])
        if u.dtype.kind != v.dtype.kind or u.shape != v.shape:
            return False
        if u.dtype.kind == "i" and not (u == v).all():
            return False
        if u.dtype.kind == "f" and np.abs(u - v).max() > 1e-5 * max(1.0, np.abs(v).max()):
            return False
    return True


def middle(values):
    """A threshold between two neighbouring values near the median, at least 1e-3 from both."""
    v = sorted(values)
    k = len(v) // 2
    for d in range(len(v)):
        for j in (k + d, k - d):
            if 1 <= j < len(v) and v[j] - v[j - 1] > 2e-3:
                return (v[j] + v[j - 1]) / 2
    raise RuntimeError("no gap between confidences to put a gate in")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mminfer", required=True)
    p.add_argument("--keep", help="write the folder here and keep it")
    args = p.parse_args()
    root = args.keep or tempfile.mkdtemp(prefix="staged-")
    if args.keep:
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
    torch.manual_seed(20261205)
    models = [Encoder().eval(), Topic().eval(), Layout().eval(), Render().eval()]
    folder = Folder(root)
    b = 2
    pix = torch.randn(b, 3, SIZE, SIZE)
    export(models[0], (pix,), os.path.join(folder.models, "encoder.onnx"), ["pixels"], ["tokens", "pooled"])
    export(models[1], (torch.randn(b, WIDTH),), os.path.join(folder.models, "topic.onnx"), ["pooled"], ["logits", "embedding"])
    export(models[2], (torch.randn(b, WIDTH), torch.zeros(b, dtype=torch.long)), os.path.join(folder.models, "layout.onnx"),
           ["pooled", "topic"], ["layout_logits"])
    export(models[3], (torch.randn(b, (SIZE // 4) ** 2, WIDTH), torch.zeros(b, dtype=torch.long), torch.zeros(b, REGIONS, dtype=torch.long),
                       torch.randn(b, WIDTH)), os.path.join(folder.models, "render.onnx"),
           ["tokens", "topic", "layout", "topic_embedding"], ["values"])

    # Inputs: images at the model's size (so preprocessing is the normalization alone) and the
    # same images as normalized .npy tensors.
    rng = np.random.default_rng(7)
    n = 24
    inputs = os.path.join(root, "inputs")
    os.makedirs(inputs)
    images, npys, pixels = [], [], []
    for i in range(n):
        base = rng.integers(0, 256, size=3)
        img = np.clip(base + rng.normal(0, 40 + 6 * i, size=(SIZE, SIZE, 3)), 0, 255).astype(np.uint8)
        x0, y0 = rng.integers(0, SIZE - 8, size=2)
        img[y0:y0 + 8, x0:x0 + 8] = rng.integers(0, 256, size=3)
        path = os.path.join(inputs, f"img{i:02d}.png")
        Image.fromarray(img).save(path)
        images.append(path)
        x = ((img.astype(np.float32) / 255 - np.array(MEAN, np.float32)) / np.array(STD, np.float32)).transpose(2, 0, 1)
        npy = os.path.join(inputs, f"img{i:02d}.npy")
        np.save(npy, np.ascontiguousarray(x, dtype=np.float32))
        npys.append(npy)
        pixels.append(torch.from_numpy(np.ascontiguousarray(x)))
    pixels = torch.stack(pixels)
    failures = []

    # 1. No gates: every stage runs, results equal torch's.
    plain = folder.with_manifest(manifest())
    want, topic_sure, layout_sure = reference(models, pixels)
    got = results(run(args, plain, npys))
    for i in range(n):
        compare(got["results"][i], want[i], f"ungated {npys[i]}", failures)
    work = {w["model"]: (w["ran"], w["skipped"]) for w in got["work"]}
    if work != {"encoder": (n, 0), "topic": (n, 0), "layout": (n, 0), "render": (n, 0)}:
        failures.append(f"ungated work report {work}")
    from_images = results(run(args, plain, images))
    for i in range(n):
        if not same(from_images["results"][i]["stages"], got["results"][i]["stages"]):
            failures.append(f"{images[i]} gave {from_images['results'][i]['stages']}, its .npy {got['results'][i]['stages']}")
    alone = [results(run(args, plain, [npys[i]]))["results"][0] for i in (0, 5, 17)]
    for r, i in zip(alone, (0, 5, 17)):
        if not same(r["stages"], got["results"][i]["stages"]):
            failures.append(f"{npys[i]} alone gave {r['stages']}, in a batch {got['results'][i]['stages']}")

    # 2. Gates at the middle of the observed confidences.
    gate_layout = {"confidence": middle(topic_sure), "default": [1, 2, 3]}
    want_l, _, _ = reference(models, pixels, gate_layout)
    ran_layout = [w["layout"][0] for w in want_l]
    gate_render = {"stage": "layout", "confidence": middle([s for s, r in zip(layout_sure, ran_layout) if r]),
                   "default": [0.5, -1, 2, 0, 0, 0, 0, 0.25]}
    want_g, _, _ = reference(models, pixels, gate_layout, gate_render)
    gated = folder.with_manifest(manifest({"layout": gate_layout, "render": gate_render}))
    got = results(run(args, gated, npys))
    for i in range(n):
        compare(got["results"][i], want_g[i], f"gated {npys[i]}", failures)
    ran = {name: sum(w[name][0] for w in want_g) for name in ("topic", "layout", "render")}
    work = {w["model"]: (w["ran"], w["skipped"]) for w in got["work"]}
    expect = {"encoder": (n, 0), **{k: (v, n - v) for k, v in ran.items()}}
    if work != expect:
        failures.append(f"gated work report {work}, torch {expect}")
    if not (0 < ran["layout"] < n and 0 < ran["render"] < n):
        failures.append(f"the gates should skip some inputs and not others: {ran}")
    print(f"gated: layout ran on {ran['layout']}/{n}, render on {ran['render']}/{n} "
          f"(thresholds {gate_layout['confidence']:.4f}, {gate_render['confidence']:.4f})")

    # 3. Sampling: reproducible by seed and distributed as softmax(logits / T).
    temperature = 1.5
    sampled = folder.with_manifest(manifest(layout_select="sample", temperature=temperature))
    copies = [npys[3]] * 200
    a = results(run(args, sampled, copies, ["--seed", "11"]))
    again = results(run(args, sampled, copies, ["--seed", "11"]))
    other = results(run(args, sampled, copies, ["--seed", "12"]))
    draws = np.array([r["stages"]["layout"]["result"] for r in a["results"]])
    if [r["stages"] for r in a["results"]] != [r["stages"] for r in again["results"]]:
        failures.append("sampling with the same seed differed")
    if [r["stages"]["layout"]["result"] for r in a["results"]] == [r["stages"]["layout"]["result"] for r in other["results"]]:
        failures.append("sampling with seeds 11 and 12 gave the same draws")
    with torch.no_grad():
        _, pooled = models[0](pixels[3:4])
        topic = models[1](pooled)[0].argmax(-1)
        probs = torch.softmax(models[2](pooled, topic)[0].double() / temperature, -1).numpy()
    for region in range(REGIONS):
        freq = np.bincount(draws[:, region], minlength=LAYOUTS) / len(draws)
        tv = 0.5 * np.abs(freq - probs[region]).sum()
        if tv > 0.15:
            failures.append(f"region {region}: draw frequencies {freq.round(3)} vs softmax {probs[region].round(3)} (TV {tv:.3f})")
    for r in a["results"]:
        want_render = reference_render(models, pixels[3:4], r["stages"]["layout"]["result"])
        if np.abs(np.array(r["stages"]["render"]["result"]) - want_render).max() > 1e-4 * max(1, np.abs(want_render).max()):
            failures.append(f"render after the draw {r['stages']['layout']['result']}: {r['stages']['render']['result']} vs {want_render}")
            break

    # 4. Served: KServe v2 BYTES images in, each image's stages as JSON out, as the CLI gives them.
    failures += served(args, root, gated, images[:6], got["results"][:6], junk_bytes=b"not an image")

    # 5. Bad folders and bad inputs.
    def bad(doc, needle):
        out = run(args, folder.with_manifest(doc), npys[:1], expect_ok=False)
        if out.returncode == 0 or needle not in out.stderr or len(out.stderr.strip().splitlines()) != 1:
            failures.append(f"expected one error line with '{needle}', got rc {out.returncode}: {out.stderr.strip()}")

    doc = manifest()
    doc["stages"][0]["inputs"]["pooled"] = "layout"
    bad(doc, "stages[0].inputs.pooled 'layout' names no earlier stage")
    doc = manifest({"layout": gate_layout})
    doc["stages"][2]["inputs"]["layout"] = "layout.layout_logits"
    bad(doc, "reads a raw output of gated stage 'layout'")
    doc = manifest({"layout": {"confidence": 0.5, "default": [0, 0]}})
    bad(doc, "stages[1].gate.default has shape 2")
    doc = manifest({"layout": {"confidence": 0.5, "default": [0, 9, 0]}})
    bad(doc, "stages[1].gate.default holds class 9")
    doc = manifest({"render": {"stage": "render", "confidence": 0.5, "default": [0] * RENDER}})
    bad(doc, "stages[2].gate.stage must name an earlier stage")
    doc = manifest()
    doc["stages"][2]["gate"] = {"stage": "topic", "confidence": 0.5}
    bad(doc, "stages[2].gate.default is missing")
    doc = manifest()
    del doc["stages"][2]["inputs"]["topic_embedding"]
    bad(doc, "input 'topic_embedding' is not bound")
    doc = manifest()
    doc["stages"][1]["inputs"]["pooled"] = "encoder.nothing"
    bad(doc, "'encoder.nothing', but the encoder outputs")
    doc = manifest()
    doc["stages"][0]["gate"] = {"confidence": 0.5, "default": 0}
    bad(doc, "stages[0].gate: the first stage has no earlier stage")
    doc = manifest()
    doc["files"]["render"] = "missing.onnx"
    bad(doc, "files.render: no such file")
    doc = manifest()
    doc["stages"][1]["temperature"] = 2
    bad(doc, "stages[1].temperature goes with \"select\": \"sample\"")
    junk = os.path.join(inputs, "junk.png")
    with open(junk, "wb") as f:
        f.write(b"not an image")
    wrong = os.path.join(inputs, "wrong.npy")
    np.save(wrong, np.zeros((3, 8, 8), np.float32))
    out = run(args, plain, [npys[0], junk, wrong, images[1]], expect_ok=False)
    doc = json.loads(out.stdout) if out.stdout.strip() else {"results": []}
    ok = [r for r in doc["results"] if "stages" in r]
    errs = [r for r in doc["results"] if "error" in r]
    if out.returncode != 1 or len(ok) != 2 or len(errs) != 2 or not same(ok[0]["stages"], got_first(plain, npys[0], args)):
        failures.append(f"a bad image and a wrong-shaped tensor among good inputs: rc {out.returncode}, {out.stdout[:300]} {out.stderr}")

    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    if failures:
        print(f"FAIL: {len(failures)} problems", file=sys.stderr)
        for f in failures[:20]:
            print("  " + f, file=sys.stderr)
        return 1
    print(f"staged pipeline: {n} inputs match torch ungated and gated; sampling reproducible; served over KServe v2; "
          "11 bad folders refused")
    return 0


def served(args, root, folder, images, expected, junk_bytes):
    """`mminfer serve` on a repository holding `folder`: the stages of `images` equal `expected`;
    a junk image is a 400 naming its element. Returns the failures."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "serve"))
    from serve_harness import Server  # noqa: E402
    import struct
    repo = os.path.join(root, "repository")
    shutil.copytree(folder, os.path.join(repo, "stages", "1"))
    failures = []
    server = Server(args.mminfer, repo)
    try:
        server.wait_ready()
        meta = server.get("/v2/models/stages").json()
        if [o["name"] for o in meta["outputs"]] != ["stages"] or [i["name"] for i in meta["inputs"]] != ["image"]:
            failures.append(f"served metadata {meta}")

        def infer(elements):
            blobs = b"".join(struct.pack("<I", len(e)) + e for e in elements)
            head = json.dumps({"inputs": [{"name": "image", "datatype": "BYTES", "shape": [len(elements)],
                                           "parameters": {"binary_data_size": len(blobs)}}]}).encode()
            return server.request("POST", "/v2/models/stages/infer", body=head + blobs,
                                  headers={"Content-Type": "application/octet-stream",
                                           "Inference-Header-Content-Length": str(len(head))})

        data = []
        for path in images:
            with open(path, "rb") as f:
                data.append(f.read())
        r = infer(data)
        if r.status != 200:
            failures.append(f"served infer: {r.status} {r.body[:300]!r}")
        else:
            out = r.json()["outputs"][0]
            answers = [json.loads(e) for e in out["data"]]
            if out["name"] != "stages" or out["shape"] != [len(images)]:
                failures.append(f"served output {out['name']} {out['shape']}")
            for path, a, want in zip(images, answers, expected):
                if not same(a, want["stages"]):
                    failures.append(f"served {path}: {a} vs the CLI's {want['stages']}")
        r = infer([data[0], junk_bytes])
        if r.status != 400 or "element 1" not in r.error():
            failures.append(f"a junk image among good ones: {r.status} {r.error()}")
        if not server.alive():
            failures.append("the server died")
    finally:
        server.stop()
    return failures


def reference_render(models, pixels, layout):
    with torch.no_grad():
        tokens, pooled = models[0](pixels)
        logits, embedding = models[1](pooled)
        topic = logits.argmax(-1)
        return models[3](tokens, topic, torch.tensor([layout]), embedding)[0].numpy().astype(np.float64)


def got_first(folder, npy, args):
    return results(run(args, folder, [npy]))["results"][0]["stages"]


if __name__ == "__main__":
    sys.exit(main())
