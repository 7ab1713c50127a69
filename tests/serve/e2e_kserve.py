"""KServe v2 / Triton as its users call it: BYTES tensors to the pipelines (the same answers as
/v1), Triton's /config and /stats, gzip and deflate bodies, readiness, and hostile bodies that
must cost neither memory nor the I/O threads."""
import base64
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import zlib

import numpy as np

from e2e_routes import tiny_expected, tiny_json_request
from serve_harness import Server, in_threads

NO_CACHE = {"Cache-Control": "no-cache"}  # computed again, not read back from what /v1 stored


def read(path):
    with open(path, "rb") as f:
        return f.read()


def binary_bytes(elements):
    """BYTES elements in the binary tensor extension: a 4-byte little-endian length, then the bytes."""
    return b"".join(struct.pack("<I", len(e)) + e for e in elements)


def binary_request(inputs, outputs=None, binary_output=True):
    """(body, headers) of a binary-extension request; inputs: [(name, [bytes elements])]."""
    head = {"inputs": [{"name": n, "datatype": "BYTES", "shape": [len(els)],
                        "parameters": {"binary_data_size": len(binary_bytes(els))}} for n, els in inputs]}
    if outputs:
        head["outputs"] = [{"name": o, "parameters": {"binary_data": binary_output}} for o in outputs]
    elif binary_output:
        head["parameters"] = {"binary_data_output": True}
    header = json.dumps(head).encode()
    body = header + b"".join(binary_bytes(els) for _, els in inputs)
    return body, {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(header)), **NO_CACHE}


def split_binary_response(r):
    """{output name: (datatype, shape, raw bytes or JSON data)} of a binary-extension answer."""
    n = int(r.headers["inference-header-content-length"])
    head, at, out = json.loads(r.body[:n]), n, {}
    for o in head["outputs"]:
        if "parameters" in o and "binary_data_size" in o["parameters"]:
            size = o["parameters"]["binary_data_size"]
            out[o["name"]] = (o["datatype"], o["shape"], r.body[at:at + size])
            at += size
        else:
            out[o["name"]] = (o["datatype"], o["shape"], o["data"])
    assert at == len(r.body), f"binary answer: {len(r.body) - at} bytes not claimed by any output"
    return out


def parse_binary_strings(raw):
    out, at = [], 0
    while at < len(raw):
        (n,) = struct.unpack_from("<I", raw, at)
        out.append(raw[at + 4:at + 4 + n])
        at += 4 + n
    return out


def v1_embeddings(ctx, inputs):
    r = ctx.server.post_json("/v1/embeddings", {"model": "clip", "input": inputs})
    assert r.status == 200, f"/v1/embeddings: {r.status} {r.error()}"
    return np.asarray([d["embedding"] for d in r.json()["data"]], np.float32)


def test_clip_bytes_infer_matches_v1(ctx):
    s = ctx.server
    images = [read(p) for p in ctx.inputs["clip_images"][:2]]
    texts = ["a photo of a cat.", "naïve café — 東京"]
    want_images = v1_embeddings(ctx, [{"image": "data:image/png;base64," + base64.b64encode(b).decode()} for b in images])
    want_texts = v1_embeddings(ctx, texts)

    # The binary extension: raw PNG bytes and UTF-8 texts, FP32 embeddings back as binary.
    body, headers = binary_request([("image", images), ("text", [t.encode() for t in texts])])
    r = s.request("POST", "/v2/models/clip/infer", body=body, headers=headers, timeout=120)
    assert r.status == 200, f"clip BYTES infer (binary): expected 200, got {r.status} {r.error()}"
    out = split_binary_response(r)
    assert sorted(out) == ["image_embedding", "text_embedding"], f"clip outputs: {sorted(out)}"
    for name, want in (("image_embedding", want_images), ("text_embedding", want_texts)):
        dt, shape, raw = out[name]
        assert dt == "FP32" and shape == list(want.shape), f"{name}: {dt} {shape}, expected FP32 {list(want.shape)}"
        got = np.frombuffer(raw, "<f4").reshape(shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"{name} differs from /v1/embeddings")

    # The JSON form: texts as strings, images base64 (JSON strings cannot hold raw bytes).
    body = {"id": "bytes-json", "inputs": [
        {"name": "text", "datatype": "BYTES", "shape": [2], "data": texts},
        {"name": "image", "datatype": "BYTES", "shape": [1], "data": [base64.b64encode(images[1]).decode()]}],
        "outputs": [{"name": "text_embedding"}, {"name": "image_embedding"}]}
    r = s.post_json("/v2/models/clip/infer", body, headers=NO_CACHE, timeout=120)
    assert r.status == 200, f"clip BYTES infer (JSON): expected 200, got {r.status} {r.error()}"
    j = r.json()
    assert j["id"] == "bytes-json" and j["model_name"] == "clip", f"answer header: {j}"
    got = {o["name"]: np.asarray(o["data"], np.float32).reshape(o["shape"]) for o in j["outputs"]}
    np.testing.assert_allclose(got["text_embedding"], want_texts, rtol=1e-5, atol=1e-5, err_msg="JSON text embeddings")
    np.testing.assert_allclose(got["image_embedding"], want_images[1:], rtol=1e-5, atol=1e-5, err_msg="JSON image embedding")

    # An output whose input is absent, a corrupt image, and a lying element length are 400s.
    body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["x"]}], "outputs": [{"name": "image_embedding"}]}
    r = s.post_json("/v2/models/clip/infer", body)
    assert r.status == 400 and "needs input 'image'" in r.error(), f"output without its input: {r.status} {r.error()}"
    body, headers = binary_request([("image", [b"not a png at all"])])
    r = s.request("POST", "/v2/models/clip/infer", body=body, headers=headers)
    assert r.status == 400 and "input 'image' element 0" in r.error(), f"corrupt image: {r.status} {r.error()}"
    header = json.dumps({"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1],
                                     "parameters": {"binary_data_size": 8}}]}).encode()
    r = s.request("POST", "/v2/models/clip/infer", body=header + struct.pack("<I", 1 << 30) + b"abcd",
                  headers={"Inference-Header-Content-Length": str(len(header))})
    assert r.status == 400 and "claims 1073741824 bytes" in r.error(), f"lying element length: {r.status} {r.error()}"


def test_audio_bytes_infer_matches_v1(ctx):
    clips = [c for c in ctx.inputs["audio_clips"] if "short" in c or "sweep" in c]
    mime = lambda p: "audio/flac" if p.endswith(".flac") else "audio/wav"
    r = ctx.server.post_json("/v1/embeddings", {"model": "audio", "input": [
        {"audio": f"data:{mime(c)};base64," + base64.b64encode(read(c)).decode()} for c in clips]}, timeout=120)
    assert r.status == 200, f"/v1/embeddings on audio: {r.status} {r.error()}"
    want = np.asarray([d["embedding"] for d in r.json()["data"]], np.float32)
    body, headers = binary_request([("audio", [read(c) for c in clips])], outputs=["audio_embedding"])
    r = ctx.server.request("POST", "/v2/models/audio/infer", body=body, headers=headers, timeout=120)
    assert r.status == 200, f"audio BYTES infer: expected 200, got {r.status} {r.error()}"
    dt, shape, raw = split_binary_response(r)["audio_embedding"]
    got = np.frombuffer(raw, "<f4").reshape(shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg="v2 audio embeddings differ from /v1")


def test_ocr_bytes_infer_matches_v1(ctx):
    s = ctx.server
    png = read(ctx.inputs["ocr_line"]["file"])
    r = s.request("POST", "/v1/ocr", body=png, headers={"Content-Type": "image/png"}, timeout=120)
    assert r.status == 200, f"/v1/ocr: {r.status} {r.error()}"
    want = r.json()["lines"]
    body, headers = binary_request([("image", [png])])
    r = s.request("POST", "/v2/models/ocr/infer", body=body, headers=headers, timeout=120)
    assert r.status == 200, f"ocr BYTES infer (binary): expected 200, got {r.status} {r.error()}"
    out = split_binary_response(r)
    texts = [t.decode() for t in parse_binary_strings(out["text"][2])]
    lines = [json.loads(t) for t in parse_binary_strings(out["lines"][2])]
    assert texts == [l["text"] for l in want], f"v2 OCR text {texts} differs from /v1/ocr {[l['text'] for l in want]}"
    assert lines == want, f"v2 OCR lines differ from /v1/ocr:\n{lines}\n{want}"
    assert out["text"][1] == [len(want)], f"text shape {out['text'][1]}, expected [{len(want)}]"
    body = {"inputs": [{"name": "image", "datatype": "BYTES", "shape": [1], "data": [base64.b64encode(png).decode()]}],
            "outputs": [{"name": "text"}]}
    r = s.post_json("/v2/models/ocr/infer", body, headers=NO_CACHE, timeout=120)
    assert r.status == 200, f"ocr BYTES infer (JSON): expected 200, got {r.status} {r.error()}"
    outs = r.json()["outputs"]
    assert [o["name"] for o in outs] == ["text"] and outs[0]["data"] == [l["text"] for l in want], f"JSON OCR: {outs}"


def test_pipeline_metadata_is_what_infer_takes(ctx):
    """A request built from nothing but the advertised metadata is accepted for every input."""
    s = ctx.server
    png = read(ctx.inputs["ocr_line"]["file"])
    sample = {"text": b"a red square", "image": png}
    for model in ("clip", "ocr"):
        meta = s.get(f"/v2/models/{model}").json()
        assert meta["platform"] == "mminfer_pipeline", f"{model} platform: {meta['platform']}"
        for spec in meta["inputs"]:
            assert spec["datatype"] == "BYTES", f"{model} input {spec}"
            shape = [1 if d < 0 else d for d in spec["shape"]]
            n = int(np.prod(shape))
            body, headers = binary_request([(spec["name"], [sample[spec["name"]]] * n)])
            head = json.loads(body[:int(headers["Inference-Header-Content-Length"])])
            head["inputs"][0]["shape"] = shape
            header = json.dumps(head).encode()
            body = header + body[int(headers["Inference-Header-Content-Length"]):]
            headers["Inference-Header-Content-Length"] = str(len(header))
            r = s.request("POST", f"/v2/models/{model}/infer", body=body, headers=headers, timeout=120)
            assert r.status == 200, f"{model} input {spec['name']} as advertised {spec}: {r.status} {r.error()}"
            names = {o["name"] for o in meta["outputs"]}
            got = set(split_binary_response(r))
            assert got <= names, f"{model} answered outputs {got} it does not advertise ({names})"
    assert s.get("/v2/models/tiny").json()["platform"] == "onnx_onnxv1", "ONNX models: platform onnx_onnxv1"


def test_triton_config_and_stats(ctx):
    s = ctx.server
    c = s.get("/v2/models/tiny/config").json()
    assert c["platform"] == "onnx_onnxv1" and c["backend"] == "mminfer" and c["name"] == "tiny", f"tiny config: {c}"
    assert c["input"] == [{"name": "x", "data_type": "TYPE_FP32", "dims": [-1, 4]}], f"tiny config input: {c['input']}"
    assert c["output"][0]["data_type"] == "TYPE_FP32" and c["max_batch_size"] == 0, f"tiny config: {c}"
    assert c["version_policy"] == {"specific": {"versions": [2]}} and c["instance_group"][0]["count"] == 2, f"tiny config: {c}"
    c = s.get("/v2/models/clip/config").json()
    assert {i["name"]: i["data_type"] for i in c["input"]} == {"image": "TYPE_STRING", "text": "TYPE_STRING"}, c["input"]
    assert c["dynamic_batching"]["default_queue_policy"]["max_queue_size"] == 64, f"clip batching: {c['dynamic_batching']}"

    def stats():
        r = s.get("/v2/models/tiny/stats")
        assert r.status == 200, f"/stats: {r.status} {r.error()}"
        (m,) = r.json()["model_stats"]
        return m
    before = stats()
    x = np.ones((2, 4), np.float32)
    for _ in range(3):
        assert s.post_json("/v2/models/tiny/infer", tiny_json_request(x)).status == 200
    bad = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1]}]}
    assert s.post_json("/v2/models/tiny/infer", bad).status == 400
    after = stats()
    inf, was = after["inference_stats"], before["inference_stats"]
    assert after["name"] == "tiny" and after["version"] == "2", f"stats name/version: {after}"
    assert inf["success"]["count"] - was["success"]["count"] == 3, f"3 successes expected: {was} -> {inf}"
    assert inf["fail"]["count"] - was["fail"]["count"] == 1, f"1 failure expected: {was} -> {inf}"
    assert after["execution_count"] - before["execution_count"] == 3, f"3 executions: {before} -> {after}"
    assert after["inference_count"] - before["inference_count"] == 3, f"3 inferences: {before} -> {after}"
    for k in ("success", "queue", "compute_input", "compute_infer", "compute_output"):
        assert inf[k]["ns"] > was[k]["ns"], f"{k} time did not grow: {was[k]} -> {inf[k]}"
    assert after["last_inference"] > 0, "last_inference should be set"
    names = {m["name"] for m in s.get("/v2/models/stats").json()["model_stats"]}
    assert {"tiny", "clip", "ocr"} <= names, f"/v2/models/stats lists {names}"
    assert {"model_configuration", "statistics"} <= set(s.get("/v2").json()["extensions"]), "extensions"


def test_gzip_and_deflate_bodies(ctx):
    s = ctx.server
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 3
    raw = json.dumps(tiny_json_request(x)).encode()
    d = zlib.compressobj(9, zlib.DEFLATED, -15)
    raw_deflate = d.compress(raw) + d.flush()
    for coding, body in (("gzip", gzip.compress(raw)), ("deflate", zlib.compress(raw)), ("deflate", raw_deflate),
                         ("GZIP, identity", gzip.compress(raw))):
        r = s.request("POST", "/v2/models/tiny/infer", body=body,
                      headers={"Content-Type": "application/json", "Content-Encoding": coding})
        assert r.status == 200, f"Content-Encoding {coding}: expected 200, got {r.status} {r.error()}"
        y = np.asarray(r.json()["outputs"][0]["data"], np.float32).reshape(2, 3)
        np.testing.assert_allclose(y, tiny_expected(ctx, 2, x), rtol=1e-5, atol=1e-5, err_msg=f"{coding} body")
    r = s.request("POST", "/v2/models/tiny/infer", body=raw, headers={"Content-Encoding": "br"})
    assert r.status == 415 and "'br'" in r.error() and "gzip" in r.headers.get("accept-encoding", ""), \
        f"unknown coding: expected 415 naming it, got {r.status} {r.error()} {r.headers}"
    r = s.request("POST", "/v2/models/tiny/infer", body=gzip.compress(raw)[:-12], headers={"Content-Encoding": "gzip"})
    assert r.status == 400 and "gzip" in r.error(), f"truncated gzip: expected 400, got {r.status} {r.error()}"
    # A bomb: 64 MiB of zeros in 64 KiB. It must stop at the body limit, not inflate in memory.
    bomb = gzip.compress(b"\0" * (64 << 20), 9)
    before = peak_mib_from_now(s)
    r = s.request("POST", "/v1/embeddings", body=bomb, headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    grew = s.memory_kib("VmHWM") / 1024 - before
    assert r.status == 413 and str(ctx.max_body_bytes) in r.error(), f"gzip bomb: expected 413, got {r.status} {r.error()}"
    assert grew < 32, f"a {len(bomb)}-byte gzip bomb raised the server's peak memory by {grew:.0f} MiB"
    ctx.figures["gzip bomb"] = f"{len(bomb)} bytes -> 413, peak RSS +{grew:.1f} MiB"


def peak_mib_from_now(server):
    """Resets the server's peak RSS (VmHWM) to its current RSS; returns that, in MiB."""
    with open(f"/proc/{server.pid}/clear_refs", "w") as f:
        f.write("5")
    return server.memory_kib("VmHWM") / 1024


def hostile_bodies():
    """(what, body, headers, words): small bodies that claim huge tensors of tiny's input x [-1, 4]."""
    claim = [16777216, 4]  # 2^26 FP32 values: 256 MiB if allocated before the data is counted
    head = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": claim,
                                   "parameters": {"binary_data_size": 4 << 26}}]}).encode()
    return [
        ("a shape far larger than its data", json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": claim,
                                                                      "data": [1]}]}).encode(), {}, ["1 values", "67108864"]),
        ("a lying binary_data_size", head + b"\0" * 16, {"Inference-Header-Content-Length": str(len(head))},
         ["the body ends before its"]),
        ("a shape whose product overflows", json.dumps({"inputs": [{"name": "x", "datatype": "FP32",
                                                                     "shape": [1 << 62, 4], "data": [1]}]}).encode(), {},
         ["holds more than"]),
        ("a negative dimension", json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [-3, 4],
                                                          "data": [1]}]}).encode(), {}, [">= 0"]),
    ]


def test_hostile_bodies_cost_no_memory(ctx):
    s = ctx.server
    before = peak_mib_from_now(s)
    cases = hostile_bodies()
    results = in_threads(len(cases) * 2, lambda i: s.request("POST", "/v2/models/tiny/infer", body=cases[i % len(cases)][1],
                                                           headers=cases[i % len(cases)][2], timeout=120))
    grew = s.memory_kib("VmHWM") / 1024 - before
    assert s.get("/v2/health/live").status == 200, "health after the hostile bodies"
    for i, r in enumerate(results):
        what, _, _, words = cases[i % len(cases)]
        assert not isinstance(r, Exception), f"{what}: {r!r}"
        assert r.status == 400 and all(w in r.error() for w in words), f"{what}: expected 400 with {words}, got {r.status} {r.error()}"
    assert grew < 64, f"{len(results)} hostile bodies of <300 bytes raised the server's peak memory by {grew:.0f} MiB"
    ctx.figures["hostile bodies"] = f"{len(results)} concurrent -> 400, peak RSS +{grew:.1f} MiB"


def test_big_bodies_leave_health_answering(ctx):
    """Four clients send JSON bodies near the body limit at once; parsing them is a worker's job,
    so /v2/health/live on another connection is answered while they are being parsed."""
    s = ctx.server
    n = (ctx.max_body_bytes - 200) // 4 // 4 * 4  # values of "0," (2 bytes each) that fit
    big = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [n // 4, 4], "data": [0] * n}]},
                     separators=(",", ":")).encode()
    assert len(big) <= ctx.max_body_bytes, f"{len(big)} bytes"
    done = threading.Event()
    health = []

    def watch():
        conn = s.connection(timeout=30)
        while not done.is_set():
            health.append(s.get("/v2/health/live", conn=conn).status)
        conn.close()
    t = threading.Thread(target=watch)
    before = s.memory_kib("VmRSS")
    t.start()
    results = in_threads(4, lambda i: s.request("POST", "/v2/models/tiny/infer", body=big,
                                                headers={"Content-Type": "application/json"}, timeout=120).status)
    done.set()
    t.join()
    grew = (s.memory_kib("VmRSS") - before) / 1024
    assert results == [200] * 4, f"four big bodies: {results}"
    assert health and set(health) == {200}, f"health during big bodies: {health[:10]}"
    ctx.figures["big bodies"] = f"4 x {len(big)} bytes -> 200; {len(health)} health answers meanwhile; RSS +{grew:.1f} MiB"


# Two models with a string input: one whose Identity consumes it (the engine refuses the node),
# one that leaves it unused (the server refuses the input). No op of the engine takes strings.
STRING_MODELS = """
import sys
from onnx import TensorProto, helper, save
s = helper.make_tensor_value_info("s", TensorProto.STRING, [1])
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
g = helper.make_graph([helper.make_node("Identity", ["s"], ["t"])], "strings", [s],
                      [helper.make_tensor_value_info("t", TensorProto.STRING, [1])])
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "unused", [s, x],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[2])
"""


def test_readiness_strict_and_not(ctx):
    """A repository with one model that cannot load (string inputs) and one that can."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "repository")
        shutil.copytree(os.path.join(ctx.repo, "tiny"), os.path.join(repo, "tiny"))
        for m in ("strings", "unused_strings"):
            os.makedirs(os.path.join(repo, m, "1"))
        subprocess.run([sys.executable, "-c", STRING_MODELS, os.path.join(repo, "strings", "1", "model.onnx"),
                        os.path.join(repo, "unused_strings", "1", "model.onnx")], check=True)
        loose = Server(ctx.mminfer, repo)
        try:
            loose.wait_ready(60)
            r = loose.get("/v2/health/ready")
            j = r.json()
            assert r.status == 200 and j["ready"] is True and j["strict"] is False, f"non-strict ready: {r.status} {j}"
            bad = {m["name"]: m["reason"] for m in j["models_not_ready"]}
            assert sorted(bad) == ["strings", "unused_strings"], f"models not ready: {bad}"
            assert "dtype string" in bad["strings"], f"a string-consuming node: {bad['strings']}"
            assert "input 's'" in bad["unused_strings"] and "string" in bad["unused_strings"], f"string input: {bad}"
            assert loose.get("/v2/models/strings/ready").status == 404 and loose.get("/v2/models/tiny/ready").status == 200
        finally:
            loose.stop()
        strict = Server(ctx.mminfer, repo, extra=["--strict-readiness"])
        try:
            assert strict.get("/v2/health/live").status == 200
            r = strict.get("/v2/health/ready")
            assert r.status == 503 and len(r.json()["models_not_ready"]) == 2, \
                f"strict readiness with a failed model: expected 503, got {r.status} {r.body!r}"
        finally:
            strict.stop()


TESTS = [test_clip_bytes_infer_matches_v1, test_audio_bytes_infer_matches_v1, test_ocr_bytes_infer_matches_v1, test_pipeline_metadata_is_what_infer_takes,
         test_triton_config_and_stats, test_gzip_and_deflate_bodies, test_hostile_bodies_cost_no_memory,
         test_big_bodies_leave_health_answering, test_readiness_strict_and_not]
