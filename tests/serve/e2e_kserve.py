"""KServe v2 / Triton as its users call it: request bodies sent with Content-Encoding, and
hostile bodies that must cost no memory."""
import gzip
import json
import zlib

import numpy as np

from e2e_routes import tiny_expected, tiny_json_request
from serve_harness import in_threads


def peak_mib_from_now(server):
    """Resets the server's peak RSS (VmHWM) to its current RSS; returns that, in MiB."""
    with open(f"/proc/{server.pid}/clear_refs", "w") as f:
        f.write("5")
    return server.memory_kib("VmHWM") / 1024


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


def hostile_bodies():
    """(what, body, headers, words): small bodies that claim huge tensors of tiny's input x [-1, 4]."""
    claim = [16777216, 4]  # 2^26 FP32 values: 256 MiB if allocated before the data is counted
    head = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": claim,
                                   "parameters": {"binary_data_size": 4 << 26}}]}).encode()
    return [
        ("a shape far larger than its data", json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": claim,
                                                                      "data": [1]}]}).encode(), {}, ["1 values", "67108864"]),
        ("a lying binary_data_size", head + b"\0" * 16, {"Inference-Header-Content-Length": str(len(head))},
         ["ends before its binary data"]),
        ("a shape whose product overflows", json.dumps({"inputs": [{"name": "x", "datatype": "FP32",
                                                                     "shape": [1 << 62, 4], "data": [1]}]}).encode(), {},
         ["too large"]),
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


TESTS = [test_gzip_and_deflate_bodies, test_hostile_bodies_cost_no_memory]
