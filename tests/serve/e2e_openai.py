"""/v1 as OpenAI's API shapes it, read as raw HTTP (tests/serve/openai_client.js drives the same
routes through the official client): every error in the envelope {"message", "type", "param",
"code"}, /v2 keeping KServe's {"error": "text"}, /v1/models listing what is loaded."""
from serve_harness import data_url


def expect_envelope(r, status, type_, param=None, code=None, words=(), what=""):
    assert r.status == status, f"{what}: expected {status}, got {r.status} {r.body[:200]!r}"
    e = r.openai_error()
    assert e["type"] == type_, f"{what}: type {e['type']!r}, expected {type_!r}"
    assert e["param"] == param, f"{what}: param {e['param']!r}, expected {param!r}"
    if code is not None:
        assert e["code"] == code, f"{what}: code {e['code']!r}, expected {code!r}"
    assert isinstance(e["message"], str) and all(w in e["message"] for w in words), f"{what}: message {e['message']!r} should say {words}"
    assert r.headers.get("content-type") == "application/json", f"{what}: content-type {r.headers.get('content-type')}"


def test_v1_errors_in_openai_envelope(ctx):
    s = ctx.server
    cases = [
        ("bad JSON", s.request("POST", "/v1/embeddings", body=b'{"model": ', headers={"Content-Type": "application/json"}),
         400, "invalid_request_error", None, None, ["not valid JSON"]),
        ("no model", s.post_json("/v1/embeddings", {"input": "hi"}), 400, "invalid_request_error", "model",
         "missing_required_parameter", ["'model'"]),
        ("model not a string", s.post_json("/v1/embeddings", {"model": 3, "input": "hi"}), 400, "invalid_request_error",
         "model", None, ["string"]),
        ("no input", s.post_json("/v1/embeddings", {"model": "clip"}), 400, "invalid_request_error", "input",
         "missing_required_parameter", ["'input'"]),
        ("a bad input", s.post_json("/v1/embeddings", {"model": "clip", "input": [3]}), 400, "invalid_request_error", "input",
         None, ["input 0"]),
        ("dimensions below 1", s.post_json("/v1/embeddings", {"model": "clip", "input": "hi", "dimensions": 0}), 400,
         "invalid_request_error", "dimensions", "invalid_value", ["at least 1"]),
        ("unknown model", s.post_json("/v1/embeddings", {"model": "nope", "input": "hi"}), 404, "not_found_error", "model",
         "model_not_found", ["'nope'"]),
        ("OCR of an unknown model", s.request("POST", "/v1/ocr?model=nope", body=b"x", headers={"Content-Type": "image/png"}),
         404, "not_found_error", "model", "model_not_found", ["'nope'"]),
        ("classify on the ocr model", s.post_json("/v1/classify", {"model": "ocr", "image": "aGk="}), 400,
         "invalid_request_error", "model", None, ["not a clip pipeline"]),
        ("an unknown model card", s.get("/v1/models/nope"), 404, "not_found_error", "model", "model_not_found", ["'nope'"]),
        ("an unknown /v1 path", s.post_json("/v1/zz", {}), 404, "not_found_error", None, "unknown_url", ["/v1/zz"]),
        ("GET of an unknown /v1 path", s.get("/v1/no/such/route"), 404, "not_found_error", None, "unknown_url", []),
        ("bare /v1", s.get("/v1"), 404, "not_found_error", None, "unknown_url", []),
        ("POST /v1/models", s.post_json("/v1/models", {}), 405, "invalid_request_error", None, "method_not_allowed",
         ["POST is not allowed"]),
        ("GET /v1/embeddings", s.get("/v1/embeddings"), 405, "invalid_request_error", None, "method_not_allowed", []),
    ]
    for what, r, status, type_, param, code, words in cases:
        expect_envelope(r, status, type_, param, code, words, what)
    # /v2 keeps KServe's shape.
    for path in ("/v2/models/nope", "/v3/zz"):
        r = s.get(path)
        assert r.status == 404 and isinstance(r.json().get("error"), str), f"GET {path}: expected KServe's error, got {r.body[:200]!r}"


def test_v1_models_lists_the_loaded_models(ctx):
    s = ctx.server
    ready = sorted(m["name"] for m in s.post_json("/v2/repository/index", {}).json() if m.get("state") == "READY")
    r = s.get("/v1/models")
    assert r.status == 200, f"GET /v1/models: {r.status} {r.body[:200]!r}"
    body = r.json()
    assert body["object"] == "list", f"GET /v1/models: {body}"
    assert sorted(m["id"] for m in body["data"]) == ready, f"/v1/models lists {body['data']}, loaded: {ready}"
    for m in body["data"]:
        assert set(m) == {"id", "object", "created", "owned_by"} and m["object"] == "model", f"a model card: {m}"
        assert isinstance(m["created"], int) and m["created"] > 1_600_000_000, f"{m['id']}: created {m['created']}"
        assert s.get("/v1/models/" + m["id"]).json() == m, f"/v1/models/{m['id']} differs from its listing"


def test_v1_usage_counts_text_tokens(ctx):
    s = ctx.server
    one = s.post_json("/v1/embeddings", {"model": "clip", "input": "a photo of a cat"}).json()["usage"]
    two = s.post_json("/v1/embeddings", {"model": "clip", "input": ["a photo of a cat"] * 2}).json()["usage"]
    image = s.post_json("/v1/embeddings", {"model": "clip", "input": [data_url(ctx.inputs["clip_images"][0])]}).json()["usage"]
    assert one["prompt_tokens"] >= 3 and one["total_tokens"] == one["prompt_tokens"], f"one text: {one}"
    assert two["prompt_tokens"] == 2 * one["prompt_tokens"], f"the same text twice: {two}, once: {one}"
    assert image == {"prompt_tokens": 0, "total_tokens": 0}, f"an image: {image}"


TESTS = [test_v1_errors_in_openai_envelope, test_v1_models_lists_the_loaded_models, test_v1_usage_counts_text_tokens]
