"""Bad requests: each gets its status and a message naming the problem, while another client
keeps being served; slow clients are cut off after the read timeout."""
import base64
import json
import socket
import struct
import threading
import time
import zlib

from e2e_load import read_response
from e2e_routes import tiny_infer
from e2e_versions import X

PNG_HEAD = b"\x89PNG\r\n\x1a\n"
def tiny_png():
    """A valid 1x1 grey PNG, made with the standard library."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return PNG_HEAD + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)) + \
        chunk(b"IDAT", zlib.compress(b"\x00\x80")) + chunk(b"IEND", b"")


# An 8x8 header (larger ones are refused from the header alone, with 413), then bytes that are no PNG.
CORRUPT_PNG = PNG_HEAD + b"\x00\x00\x00\rIHDR" + bytes([0, 0, 0, 8, 0, 0, 0, 8]) + bytes(range(8, 200))


def tiny_body(datatype="FP32", shape=(2, 4), data=None):
    values = data if data is not None else [0.5] * (shape[0] * shape[1])
    return {"inputs": [{"name": "x", "datatype": datatype, "shape": list(shape), "data": values}]}


def embed(value, model="clip"):
    return {"model": model, "input": value}


# (what, method, path, body, headers, status, words the message must hold)
CASES = [
    ("malformed JSON to /v1/embeddings", "POST", "/v1/embeddings", b'{"input": [', {}, 400, ["not valid JSON"]),
    ("malformed JSON to infer", "POST", "/v2/models/tiny/infer", b'{"inputs": [{"name": "x",', {}, 400, ["not valid JSON"]),
    ("a JSON list instead of an object", "POST", "/v1/embeddings", [1, 2], {}, 400, ["JSON object"]),
    ("no input", "POST", "/v1/embeddings", {"model": "clip"}, {}, 400, ["'input'"]),
    ("wrong dtype", "POST", "/v2/models/tiny/infer", tiny_body("INT64", data=[1] * 8), {}, 400, ["FP32", "INT64"]),
    ("unknown dtype", "POST", "/v2/models/tiny/infer", tiny_body("FP42"), {}, 400, ["FP42", "not supported"]),
    ("wrong rank", "POST", "/v2/models/tiny/infer", tiny_body(shape=(8,), data=[0.5] * 8), {}, 400, ["rank 2", "rank 1"]),
    ("wrong dimension", "POST", "/v2/models/tiny/infer", tiny_body(shape=(2, 5)), {}, 400, ["dimension 1 must be 4"]),
    ("too few values", "POST", "/v2/models/tiny/infer", tiny_body(data=[0.5] * 7), {}, 400, ["7 values", "8 elements"]),
    ("a string among numbers", "POST", "/v2/models/tiny/infer", tiny_body(data=[0.5] * 7 + ["x"]), {}, 400,
     ["element 7", "not a number"]),
    ("unknown input name", "POST", "/v2/models/tiny/infer",
     {"inputs": [{"name": "z", "datatype": "FP32", "shape": [1, 4], "data": [0] * 4}]}, {}, 400, ["'z'", "not an input"]),
    ("binary header longer than the body", "POST", "/v2/models/tiny/infer", b'{"inputs": []}',
     {"Inference-Header-Content-Length": "999"}, 400, ["999", "larger than the body"]),
    ("bad base64 image", "POST", "/v1/embeddings", embed([{"image": "data:image/png;base64,iVBO@@@@"}]), {}, 400,
     ["input 0", "base64", "offset 4"]),
    ("bad base64 for OCR", "POST", "/v1/ocr", {"image": "%%%"}, {}, 400, ["base64"]),
    ("corrupt image to embeddings", "POST", "/v1/embeddings",
     embed(["data:image/png;base64," + base64.b64encode(CORRUPT_PNG).decode()]), {}, 400, ["input 0", "PNG"]),
    ("corrupt image to OCR", "POST", "/v1/ocr", CORRUPT_PNG, {"Content-Type": "image/png"}, 400, ["PNG"]),
    ("not an image at all", "POST", "/v1/ocr", b"hello, world", {"Content-Type": "image/png"}, 400, ["unrecognised format"]),
    ("empty OCR body", "POST", "/v1/ocr", b"", {"Content-Type": "image/png"}, 400, ["no image"]),
    ("corrupt image to classify", "POST", "/v1/classify",
     {"image": base64.b64encode(CORRUPT_PNG).decode(), "labels": ["a", "b"]}, {}, 400, ["PNG"]),
    ("text to the audio model", "POST", "/v1/embeddings", embed("hello", "audio"), {}, 400, ["takes no text"]),
    ("invalid UTF-8 text", "POST", "/v1/embeddings", b'{"model": "clip", "input": "caf\xc3"}', {}, 400, ["not valid JSON"]),
    ("a template without {}", "POST", "/v1/classify", {"image": "aGk=", "labels": ["a"], "templates": ["no slot"]}, {},
     400, ["{}"]),
    ("OCR on a clip model", "POST", "/v1/ocr?model=clip", CORRUPT_PNG, {"Content-Type": "image/png"}, 400,
     ["not an ocr pipeline"]),
    ("a tensor model's input to a pipeline", "POST", "/v2/models/clip/infer", tiny_body(), {}, 400, ["'x'", "not an input"]),
    ("FP32 to a pipeline's BYTES input", "POST", "/v2/models/clip/infer",
     {"inputs": [{"name": "text", "datatype": "FP32", "shape": [1], "data": [1.0]}]}, {}, 400, ["'text'", "BYTES", "FP32"]),
    ("more texts than the queue holds", "POST", "/v1/embeddings", embed([f"text {i}" for i in range(65)]), {}, 400,
     ["65 text inputs", "(64)"]),
    ("more prompts than the queue holds", "POST", "/v1/classify",
     {"image": base64.b64encode(tiny_png()).decode(), "labels": [f"l{i}" for i in range(33)], "templates": ["{}", "a {}"]}, {}, 400, ["66 prompts", "(64)"]),
    ("unknown model metadata", "GET", "/v2/models/nope", None, {}, 404, ["unknown model 'nope'"]),
    ("unknown model infer", "POST", "/v2/models/nope/infer", tiny_body(), {}, 404, ["unknown model 'nope'"]),
    ("unknown model embeddings", "POST", "/v1/embeddings", embed("hi", "nope"), {}, 404, ["model 'nope' does not exist"]),
    ("no model for embeddings", "POST", "/v1/embeddings", {"input": "hi"}, {}, 400, ["needs 'model'"]),
    ("unknown model OCR", "POST", "/v1/ocr?model=nope", PNG_HEAD, {"Content-Type": "image/png"}, 404, ["'nope'"]),
    ("a bad version", "GET", "/v2/models/tiny/versions/x1", None, {}, 400, ["'x1' is not a model version"]),
    ("unknown route", "GET", "/v3/anything", None, {}, 404, ["no route /v3/anything"]),
    ("wrong method", "GET", "/v1/embeddings", None, {}, 405, ["GET is not allowed on /v1/embeddings"]),
]


class Watcher:
    """Another client, served throughout: health and infer on one keep-alive connection."""

    def __init__(self, ctx):
        self.ctx, self.statuses, self.stop_flag = ctx, [], threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        conn = self.ctx.server.connection(timeout=30)
        while not self.stop_flag.is_set():
            try:
                self.statuses.append(self.ctx.server.get("/v2/health/ready", conn=conn).status)
                self.statuses.append(tiny_infer(self.ctx, X, conn=conn)[0])
            except Exception as e:
                self.statuses.append(repr(e))
                conn.close()
            time.sleep(0.005)
        conn.close()

    def stop(self, what):
        self.stop_flag.set()
        self.thread.join()
        bad = [s for s in self.statuses if s != 200]
        assert self.statuses and not bad, f"the other client was not served during {what}: {len(bad)} failures {bad[:5]}"


OPENAI_TYPES = {400: "invalid_request_error", 404: "not_found_error", 405: "invalid_request_error",
                413: "invalid_request_error", 429: "rate_limit_error", 500: "server_error", 503: "server_error"}


def error_shape_problems(what, path, r):
    """/v1 answers errors in OpenAI's envelope with the type its status means; /v2 keeps KServe's
    {"error": "text"}."""
    if path.startswith("/v1/"):
        try:
            e = r.openai_error()
        except AssertionError as err:
            return [f"{what}: {err}"]
        if e["type"] != OPENAI_TYPES.get(r.status):
            return [f"{what}: type {e['type']!r} for status {r.status}, expected {OPENAI_TYPES.get(r.status)!r}"]
        return []
    body = r.json()
    return [] if isinstance(body.get("error"), str) else [f"{what}: expected KServe's {{\"error\": \"text\"}}, got {r.body[:120]!r}"]


def test_bad_inputs_get_clear_errors(ctx):
    watcher = Watcher(ctx)
    failures = []
    for what, method, path, body, headers, status, words in CASES:
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
        h = {"Content-Type": "application/json"}
        h.update(headers)
        r = ctx.server.request(method, path, body=body, headers=h)
        message = r.error()
        if r.status != status or not all(w in message for w in words):
            failures.append(f"{what}: expected {status} naming {words}, got {r.status} {message[:200]!r}")
        elif r.headers.get("content-type") != "application/json":
            failures.append(f"{what}: the error should be JSON, came as {r.headers.get('content-type')}")
        else:
            failures += error_shape_problems(what, path, r)
    watcher.stop("the bad-input suite")
    assert not failures, "\n  ".join(["bad inputs answered wrongly:"] + failures)
    assert ctx.server.alive(), "the server died on bad input"


def raw_request(ctx, data, timeout=30):
    """Sends bytes on a new socket and reads until the server closes (or `timeout`)."""
    s = socket.create_connection((ctx.server.host, ctx.server.port), timeout=timeout)
    try:
        s.sendall(data)
        return read_until_close(s)
    finally:
        s.close()


def read_until_close(s):
    chunks = []
    while True:
        try:
            b = s.recv(65536)
        except ConnectionResetError:
            break
        if not b:
            break
        chunks.append(b)
    return b"".join(chunks)


def test_body_over_the_limit_gets_413(ctx):
    watcher = Watcher(ctx)
    limit = ctx.max_body_bytes
    # Declared length over the limit: refused from the headers, before the body is read.
    head = (f"POST /v1/ocr HTTP/1.1\r\nHost: localhost\r\nContent-Type: image/png\r\nContent-Length: {limit + 1}\r\n\r\n").encode()
    answer = raw_request(ctx, head + b"\0" * 1000)
    assert answer.startswith(b"HTTP/1.1 413"), f"a body over {limit} bytes: expected 413, got {answer[:60]!r}"
    assert f"limit of {limit} bytes".encode() in answer, f"the 413 should name the limit: {answer[-200:]!r}"
    v1_answer = answer
    # The whole body sent through http.client.
    try:
        r = ctx.server.request("POST", "/v1/embeddings", body=b" " * (limit + 10),
                               headers={"Content-Type": "application/json"})
        assert r.status == 413, f"a {limit + 10}-byte body: expected 413, got {r.status}"
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server answered and closed while the body was still being sent
    watcher.stop("the 413 tests")
    # /v1 clients read the HTTP layer's own 413 in OpenAI's envelope, /v2 clients in KServe's shape.
    body = json.loads(v1_answer.partition(b"\r\n\r\n")[2])
    assert isinstance(body.get("error"), dict) and body["error"].get("type") == "invalid_request_error" and \
        body["error"].get("code") == "request_too_large", f"the 413 on /v1 should be OpenAI's envelope: {body}"
    answer = raw_request(ctx, head.replace(b"/v1/ocr", b"/v2/models/tiny/infer") + b"\0" * 1000)
    body = json.loads(answer.partition(b"\r\n\r\n")[2])
    assert answer.startswith(b"HTTP/1.1 413") and isinstance(body.get("error"), str), f"the 413 on /v2: {answer[:300]!r}"


def expect_cut_off(ctx, what, data, answer_starts):
    """After the timeout the server answers `answer_starts` (b"" for a plain close) and closes;
    other clients are served while this one stalls."""
    s = socket.create_connection((ctx.server.host, ctx.server.port), timeout=ctx.read_timeout_s * 10 + 5)
    try:
        s.sendall(data)
        time.sleep(ctx.read_timeout_s / 4)
        for _ in range(3):
            assert ctx.server.get("/v2/health/live").status == 200, f"{what}: another client was not served"
        try:
            answer = read_until_close(s)
        except socket.timeout:
            raise AssertionError(f"{what}: still open {ctx.read_timeout_s * 10 + 5:.0f} s later, "
                                 f"though the read timeout is {ctx.read_timeout_s} s")
        assert answer.startswith(answer_starts) and (answer_starts or not answer), \
            f"{what}: expected {answer_starts or b'a close'!r}, got {answer[:80]!r}"
        return answer
    finally:
        s.close()


def test_slow_clients_are_cut_off(ctx):
    watcher = Watcher(ctx)
    for what, data in (("half the headers", b"POST /v1/embeddings HTTP/1.1\r\nHost: localhost\r\nContent-Ty"),
                       ("half the body", b"POST /v1/embeddings HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json"
                                         b"\r\nContent-Length: 100\r\n\r\n{\"input\": ")):
        answer = expect_cut_off(ctx, what, data, b"HTTP/1.1 408")
        assert b"read timeout" in answer, f"{what}: the 408 should say the request missed the read timeout: {answer!r}"
    # A keep-alive connection that never sends a request is closed after the idle timeout.
    expect_cut_off(ctx, "an idle connection", b"", b"")
    watcher.stop("the slow clients")


def test_http_framing(ctx):
    """HEAD answers carry no body, pipelined requests are answered in order, chunked bodies are
    read, and a client that asks "Expect: 100-continue" (curl does for bodies over 1 MiB) gets
    the go-ahead, or its refusal at once when the declared body is over the limit."""
    s = socket.create_connection((ctx.server.host, ctx.server.port), timeout=30)
    try:
        s.sendall(b"HEAD /v2/health/live HTTP/1.1\r\nHost: localhost\r\n\r\nGET /v2 HTTP/1.1\r\nHost: localhost\r\n\r\n")
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += s.recv(65536)
        head, _, rest = buf.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), f"HEAD: expected 200, got {head[:40]!r}"
        while len(rest) < 9:
            rest += s.recv(65536)
        assert rest.startswith(b"HTTP/1.1 "), f"HEAD's answer carried a body: {rest[:40]!r}"
        status, _ = read_response(s, rest)
        assert status == 200, f"GET after HEAD on one connection: expected 200, got {status}"

        chunked = (b"POST /v1/embeddings HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n8\r\n{\"input\"\r\n1B\r\n: \"a cat\", \"model\": \"clip\"}\r\n0\r\n\r\n")
        s.sendall(chunked + b"GET /v2/health/ready HTTP/1.1\r\nHost: localhost\r\n\r\n")
        first, rest = read_response(s)
        second, _ = read_response(s, rest)
        assert (first, second) == (200, 200), f"chunked POST then a pipelined GET: expected 200, 200, got {first}, {second}"
    finally:
        s.close()

    s = socket.create_connection((ctx.server.host, ctx.server.port), timeout=30)
    try:
        body = json.dumps({"model": "clip", "input": "a photo of a dog"}).encode()
        s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  b"Expect: 100-continue\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        interim = s.recv(65536)
        assert interim.startswith(b"HTTP/1.1 100"), f"Expect: 100-continue: expected 100 Continue, got {interim[:60]!r}"
        s.sendall(body)
        status, _ = read_response(s, interim.partition(b"\r\n\r\n")[2])
        assert status == 200, f"the body sent after 100 Continue: expected 200, got {status}"
    finally:
        s.close()
    head = (f"POST /v1/ocr HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\n"
            f"Content-Length: {ctx.max_body_bytes + 1}\r\n\r\n").encode()
    answer = raw_request(ctx, head)
    assert answer.startswith(b"HTTP/1.1 413"), f"Expect: 100-continue over the limit: expected 413 at once, got {answer[:60]!r}"


def test_ambiguous_framing_gets_400_and_close(ctx):
    """A request whose end is ambiguous (a Transfer-Encoding not ending in chunked, or beside a
    Content-Length; HTTP/1.1 without exactly one Host) is answered 400 and the connection closed:
    bytes after it are never read as a request of their own (request smuggling)."""
    smuggled = b"GET /v2/health/live HTTP/1.1\r\nHost: localhost\r\n\r\n"
    heads = [(f"Transfer-Encoding: {te}\r\n".encode(), b"must end with chunked")
             for te in ("gzip", "identity", "xchunked", "chunked, identity")]
    heads += [(b"Transfer-Encoding: gzip\r\nTransfer-Encoding: x\r\n", b"must end with chunked"),
              (b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", b"")]  # the parser itself refuses this one
    for head, why in heads:
        answer = raw_request(ctx, b"POST /v1/embeddings HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" +
                             head + b"\r\n" + smuggled)
        assert answer.startswith(b"HTTP/1.1 400") and why in answer, f"{head!r}: expected 400, got {answer!r}"
        assert answer.count(b"HTTP/1.1 ") == 1, f"{head!r}: the bytes after it were answered as a request: {answer!r}"
    for request, why in ((b"GET /v2/health/live HTTP/1.1\r\n\r\n", b"without a Host"),
                         (b"GET /v2/health/live HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", b"several Host")):
        answer = raw_request(ctx, request)
        assert answer.startswith(b"HTTP/1.1 400") and why in answer, f"{request!r}: expected 400, got {answer[:120]!r}"
    # HTTP/1.0 needs no Host, and a chunked body still works (test_http_framing).
    answer = raw_request(ctx, b"GET /v2/health/live HTTP/1.0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200"), f"HTTP/1.0 without Host: expected 200, got {answer[:60]!r}"


def test_hostile_json_gets_400(ctx):
    """Tensor data nested 80,000 levels deep once overflowed the server's stack (SIGSEGV); a
    version of 2**32 + 1 once wrapped around to version 1. Both are 400s, and the server lives on."""
    deep = b"[" * 80000 + b"1" + b"]" * 80000
    body = b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": ' + deep + b"}]}"
    r = ctx.server.request("POST", "/v2/models/tiny/infer", body=body, headers={"Content-Type": "application/json"})
    assert r.status == 400 and "nested deeper than 64 levels" in r.error(), f"deep JSON: {r.status} {r.error()[:120]}"
    for version in (4294967297, -4294967295, 0):
        r = ctx.server.request("POST", "/v2/repository/models/tiny/load",
                               body=json.dumps({"parameters": {"version": version}}).encode())
        assert r.status == 400 and "positive version number" in r.error(), f"version {version}: {r.status} {r.error()[:120]}"
    assert ctx.server.alive() and ctx.server.get("/v2/health/live").status == 200, "the server did not survive"


TESTS = [test_bad_inputs_get_clear_errors, test_hostile_json_gets_400, test_body_over_the_limit_gets_413, test_slow_clients_are_cut_off,
         test_http_framing, test_ambiguous_framing_gets_400_and_close]
