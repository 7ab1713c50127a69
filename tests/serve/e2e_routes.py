"""Every route's happy path, checked against independent answers: numpy for the tensor model,
`mminfer embed --jsonl` for embeddings, the rendered text for OCR, torch's probabilities for
zero-shot labels."""
import base64
import json
import math
import struct
import subprocess

import numpy as np

from serve_harness import data_url, metric, parse_metrics

CLOSE = dict(rtol=1e-5, atol=1e-5)


def tiny_expected(ctx, version, x):
    ref = ctx.inputs["tiny"][str(version)]
    return np.asarray(x, np.float32) @ np.asarray(ref["W"], np.float32) + np.asarray(ref["b"], np.float32)


def tiny_json_request(x):
    x = np.asarray(x, np.float32)
    return {"id": "e2e", "inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape), "data": x.ravel().tolist()}]}


def tiny_infer(ctx, x, path="/v2/models/tiny/infer", conn=None):
    """(status, model_version, y as float32 array or None)."""
    r = ctx.server.post_json(path, tiny_json_request(x), conn=conn)
    if r.status != 200:
        return r.status, None, None
    out = r.json()
    y = out["outputs"][0]
    return r.status, out["model_version"], np.asarray(y["data"], np.float32).reshape(y["shape"])


def test_health_and_server_metadata(ctx):
    s = ctx.server
    r = s.get("/v2/health/live")
    assert r.status == 200 and r.json() == {"live": True}, f"/v2/health/live: expected 200 live, got {r.status} {r.body!r}"
    r = s.get("/v2/health/ready")
    assert r.status == 200 and r.json()["ready"] is True, f"/v2/health/ready: expected 200 ready, got {r.status} {r.body!r}"
    meta = s.get("/v2").json()
    assert "binary_tensor_data" in meta["extensions"], f"/v2 should list the binary tensor extension: {meta}"
    index = {m["name"]: m for m in s.post_json("/v2/repository/index", {}).json()}
    assert sorted(index) == ["audio", "clip", "ocr", "slow", "tiny"], f"repository index lists {sorted(index)}"
    for name, m in index.items():
        assert m["state"] == "READY", f"model {name} should be READY: {m}"
    assert index["tiny"]["version"] == "2" and index["clip"]["version"] == "2", f"the highest versions should be served: {index}"


def test_model_metadata_and_ready(ctx):
    s = ctx.server
    meta = s.get("/v2/models/tiny").json()
    assert meta["versions"] == ["2"], f"tiny serves version 2 at start, metadata says {meta['versions']}"
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}], f"tiny inputs: {meta['inputs']}"
    assert meta["outputs"][0]["name"] == "y", f"tiny outputs: {meta['outputs']}"
    assert s.get("/v2/models/tiny/versions/2").status == 200, "/v2/models/tiny/versions/2 should answer 200"
    r = s.get("/v2/models/tiny/versions/1")
    assert r.status == 404 and "no loaded version 1" in r.error(), f"version 1 is not loaded: expected 404, got {r.status} {r.error()}"
    assert s.get("/v2/models/tiny/ready").status == 200, "/v2/models/tiny/ready should be 200"
    assert s.get("/v2/models/tiny/versions/2/ready").json()["ready"] is True, "tiny version 2 should be ready"
    assert s.get("/v2/models/tiny/versions/1/ready").status == 404, "tiny version 1 is not loaded: ready should be 404"
    clip = s.get("/v2/models/clip").json()
    assert {i["name"] for i in clip["inputs"]} == {"image", "text"}, f"clip takes image and text: {clip['inputs']}"


def test_kserve_infer_json_and_binary(ctx):
    s = ctx.server
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 7 - 0.5
    expected = tiny_expected(ctx, 2, x)
    status, version, y_json = tiny_infer(ctx, x)
    assert status == 200 and version == "2", f"JSON infer: expected 200 from version 2, got {status} {version}"
    np.testing.assert_allclose(y_json, expected, **CLOSE, err_msg="JSON infer differs from numpy's x W + b")

    header = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [3, 4],
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "parameters": {"binary_data_output": True}}).encode()
    r = s.request("POST", "/v2/models/tiny/infer", body=header + x.astype("<f4").tobytes(),
                  headers={"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(header))})
    assert r.status == 200, f"binary infer: expected 200, got {r.status} {r.error()}"
    n = int(r.headers.get("inference-header-content-length", -1))
    assert 0 < n < len(r.body), f"binary answer needs Inference-Header-Content-Length: {r.headers}"
    out = json.loads(r.body[:n])["outputs"][0]
    assert out["shape"] == [3, 3] and out["parameters"]["binary_data_size"] == 36, f"binary output header: {out}"
    y_bin = np.frombuffer(r.body[n:], "<f4").reshape(3, 3)
    assert np.array_equal(y_bin, y_json), f"binary and JSON answers differ:\n{y_bin}\n{y_json}"

    # Binary input with a JSON answer, asking for the output by name.
    header = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [3, 4],
                                     "parameters": {"binary_data_size": x.nbytes}}], "outputs": [{"name": "y"}]}).encode()
    r = s.request("POST", "/v2/models/tiny/versions/2/infer", body=header + x.tobytes(),
                  headers={"Inference-Header-Content-Length": str(len(header))})
    assert r.status == 200, f"binary in, JSON out: expected 200, got {r.status} {r.error()}"
    y = np.asarray(r.json()["outputs"][0]["data"], np.float32).reshape(3, 3)
    assert np.array_equal(y, y_json), "binary input gave another answer than JSON input"


def cli_embeddings(ctx, pipeline, args):
    out = subprocess.run([ctx.mminfer, "embed", "--pipeline", pipeline, "--jsonl"] + args, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, f"mminfer embed failed: {out.stderr}"
    return [np.asarray(json.loads(line)["embedding"], np.float32) for line in out.stdout.splitlines()]


def assert_embeddings_close(got, want, what):
    assert len(got) == len(want), f"{what}: {len(got)} embeddings, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"{what} {i}: {g.shape[0]} dims, the CLI gives {w.shape[0]}"
        diff = float(np.max(np.abs(g - w)))
        assert diff <= 1e-4, f"{what} {i}: max |server - CLI| = {diff:.2e}, expected <= 1e-4"
        assert abs(float(np.linalg.norm(g)) - 1) < 1e-4, f"{what} {i} is not L2-normalized"


def test_embeddings_match_cli(ctx):
    images = ctx.inputs["clip_images"][:3]
    texts = ["a photo of a cat.", "naïve café — 東京"]
    body = {"model": "clip", "input": [texts[0], data_url(images[0]), {"text": texts[1]}, {"image": data_url(images[1])},
                                       data_url(images[2])]}
    r = ctx.server.post_json("/v1/embeddings", body)
    assert r.status == 200, f"/v1/embeddings: expected 200, got {r.status} {r.error()}"
    out = r.json()
    assert out["object"] == "list" and out["model"] == "clip", f"OpenAI list shape expected: {out.keys()}"
    assert [d["index"] for d in out["data"]] == list(range(5)), "data must come back in input order"
    got = [np.asarray(d["embedding"], np.float32) for d in out["data"]]
    want = cli_embeddings(ctx, ctx.repo + "/clip/2", ["--text", texts[0], "--image", images[0], "--text", texts[1],
                                                       "--image", images[1], "--image", images[2]])
    assert_embeddings_close(got, want, "clip input")

    body = {"model": "clip", "input": texts[0], "encoding_format": "base64"}
    b64 = ctx.server.post_json("/v1/embeddings", body).json()["data"][0]["embedding"]
    as_floats = np.frombuffer(base64.b64decode(b64), "<f4")
    assert np.array_equal(as_floats, got[0]), "encoding_format base64 must hold the same float32 values"


def test_audio_embeddings_match_cli(ctx):
    clips = [c for c in ctx.inputs["audio_clips"] if "short" in c or "sweep" in c]
    assert len(clips) == 2, f"expected the short and sweep clips in {ctx.inputs['audio_clips']}"
    mime = lambda p: "audio/flac" if p.endswith(".flac") else "audio/wav"
    body = {"model": "audio", "input": [data_url(clips[0], mime(clips[0])), {"audio": data_url(clips[1], mime(clips[1]))}]}
    r = ctx.server.post_json("/v1/embeddings", body, timeout=120)
    assert r.status == 200, f"/v1/embeddings on audio: expected 200, got {r.status} {r.error()}"
    got = [np.asarray(d["embedding"], np.float32) for d in r.json()["data"]]
    want = cli_embeddings(ctx, ctx.inputs["audio_dir"], ["--audio", clips[0], "--audio", clips[1]])
    assert_embeddings_close(got, want, "audio input")


def squeeze(text):
    return "".join(text.split())


def test_ocr_reads_rendered_line(ctx):
    line = ctx.inputs["ocr_line"]
    with open(line["file"], "rb") as f:
        png = f.read()
    r = ctx.server.request("POST", "/v1/ocr", body=png, headers={"Content-Type": "image/png"}, timeout=120)
    assert r.status == 200, f"/v1/ocr with image bytes: expected 200, got {r.status} {r.error()}"
    out = r.json()
    text = " ".join(l["text"] for l in out["lines"])
    assert squeeze(text) == squeeze(line["text"]), f"OCR read {text!r}, the image says {line['text']!r}"
    width, height = struct.unpack(">II", png[16:24])
    for l in out["lines"]:
        assert len(l["box"]) == 4 and 0 < l["score"] <= 1, f"each line needs a 4-point box and a score: {l}"
        for x, y in l["box"]:
            assert -2 <= x <= width + 2 and -2 <= y <= height + 2, f"box point {(x, y)} outside the {width}x{height} image"
    r = ctx.server.post_json("/v1/ocr", {"image": base64.b64encode(png).decode()})
    assert r.status == 200, f"/v1/ocr with base64 JSON: expected 200, got {r.status} {r.error()}"
    assert [l["text"] for l in r.json()["lines"]] == [l["text"] for l in out["lines"]], "base64 and bytes must read alike"
    assert r.json()["cached"] is True, "the same image again should come from the cache"


def check_scores(labels, expected_labels, what):
    scores = [l["score"] for l in labels]
    assert sorted(l["label"] for l in labels) == sorted(expected_labels), f"{what}: labels {[l['label'] for l in labels]}"
    assert scores == sorted(scores, reverse=True), f"{what}: scores must come highest first: {scores}"
    assert math.isclose(sum(scores), 1, abs_tol=1e-4), f"{what}: scores sum to {sum(scores)}, expected 1"


def torch_probs(ctx, labels, image):
    for case in ctx.inputs["clip_classify"]:
        if case["labels"] == labels:
            for r in case["results"]:
                if image.endswith(r["file"]):
                    return r["probs"]
    raise AssertionError(f"no torch reference for {labels} on {image}")


def test_classify_labels_and_scores(ctx):
    image = ctx.inputs["clip_images"][1]
    # The served version's own labels (version 2's).
    r = ctx.server.post_json("/v1/classify", {"image": data_url(image)})
    assert r.status == 200, f"/v1/classify: expected 200, got {r.status} {r.error()}"
    labels = r.json()["labels"]
    v2 = ctx.inputs["clip_v2"]
    check_scores(labels, v2["labels"], "default labels")
    want = torch_probs(ctx, v2["labels"], image)
    for l in labels:
        assert abs(l["score"] - want[l["label"]]) < 1e-3, f"{l['label']}: server {l['score']:.5f}, torch {want[l['label']]:.5f}"
    # Labels and templates from the request, as a comma-separated string and a list.
    v1 = ctx.inputs["clip_v1"]
    r = ctx.server.post_json("/v1/classify", {"image": data_url(image), "labels": ",".join(v1["labels"]),
                                              "templates": v1["templates"]})
    assert r.status == 200, f"/v1/classify with labels: expected 200, got {r.status} {r.error()}"
    assert r.json()["image_cached"] is True, "the image's embedding should be reused from the first call"
    check_scores(r.json()["labels"], v1["labels"], "request labels")
    want = torch_probs(ctx, v1["labels"], image)
    for l in r.json()["labels"]:
        assert abs(l["score"] - want[l["label"]]) < 1e-3, f"{l['label']}: server {l['score']:.5f}, torch {want[l['label']]:.5f}"


def test_metrics_and_page(ctx):
    r = ctx.server.get("/metrics")
    assert r.status == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4"), \
        f"/metrics: expected Prometheus text, got {r.status} {r.headers.get('content-type')}"
    m = parse_metrics(r.body.decode())
    for name, labels in (("mminfer_requests_total", dict(endpoint="/v1/embeddings", model="clip", code="200")),
                         ("mminfer_batches_total", dict(model="clip", queue="image")),
                         ("mminfer_batch_size_count", dict(model="clip", queue="text")),
                         ("mminfer_cache_misses_total", {})):
        assert metric(m, name, **labels) > 0, f"/metrics lacks {name}{labels} or it is 0"
    r = ctx.server.get("/")
    assert r.status == 200 and r.headers["content-type"].startswith("text/html"), f"GET /: {r.status} {r.headers}"
    for element in (b'id="drop"', b'id="file"', b'id="text"', b"/v1/ocr", b"/v1/classify", b"/v1/embeddings"):
        assert element in r.body, f"the page lacks {element!r}"


TESTS = [test_health_and_server_metadata, test_model_metadata_and_ready, test_kserve_infer_json_and_binary,
         test_embeddings_match_cli, test_audio_embeddings_match_cli, test_ocr_reads_rendered_line,
         test_classify_labels_and_scores, test_metrics_and_page]
