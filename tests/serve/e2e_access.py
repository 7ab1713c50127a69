#!/usr/bin/python3
"""Access to `mminfer serve`: API keys and the admin key, the Origin and Host checks, CORS,
TLS, and the per-client connection limit with the first-request timeout.

  e2e_access.py --mminfer BIN DIR      (DIR: make_serve_repository.py's OUT)

Each test starts a server of its own on a repository holding only `tiny`. Prints one line per
test and 'N passed, N failed'."""
import argparse
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from serve_harness import Server, run_tests  # noqa: E402

USER_KEY, ADMIN_KEY, ENV_KEY = "user-9f2c41", "admin-77d0e3", "env-5b1a90"
INFER = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}


class Context:
    def __init__(self, mminfer, out, tmp):
        self.mminfer = mminfer
        self.tmp = tmp
        self.repo = os.path.join(tmp, "repo")
        os.makedirs(self.repo)
        os.symlink(os.path.abspath(os.path.join(out, "repository", "tiny")), os.path.join(self.repo, "tiny"))

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def start_server(self, *extra, config=None, env=None, ssl_context=None):
        saved = dict(os.environ)
        os.environ.update(env or {})
        try:
            s = Server(self.mminfer, self.repo, self.write("serve.json", json.dumps(config)) if config else None, extra, ssl_context)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        s.wait_ready()
        return s


def bearer(key):
    return {"Authorization": f"Bearer {key}"}


def test_api_keys_and_admin_key(ctx):
    s = ctx.start_server("--api-key-file", ctx.write("keys", f"# users\n{USER_KEY}\n"),
                   "--admin-key-file", ctx.write("admin", ADMIN_KEY + "\n"), env={"MMINFER_API_KEYS": ENV_KEY})
    try:
        r = s.post_json("/v2/models/tiny/infer", INFER)
        assert r.status == 401 and r.headers.get("www-authenticate", "").startswith("Bearer"), \
            f"infer without a key: expected 401 with WWW-Authenticate: Bearer, got {r.status} {r.headers}"
        r = s.post_json("/v2/models/tiny/infer", INFER, headers=bearer(USER_KEY + "x"))
        assert r.status == 401, f"infer with a wrong key: expected 401, got {r.status}"
        for key in (USER_KEY, ENV_KEY, ADMIN_KEY):
            r = s.post_json("/v2/models/tiny/infer", INFER, headers=bearer(key))
            assert r.status == 200, f"infer with key {key}: expected 200, got {r.status} {r.error()}"
        assert s.get("/metrics").status == 401, "/metrics needs a key too"
        assert s.get("/v2/health/ready").status == 200, "health stays open (as in Triton)"
        unload = "/v2/repository/models/tiny/unload"
        assert s.request("POST", unload).status == 401, "unload without any key: 401"
        r = s.request("POST", unload, headers=bearer(USER_KEY))
        assert r.status == 403, f"unload with a user key: expected 403, got {r.status}"
        assert s.get("/v2/models/tiny/ready", headers=bearer(USER_KEY)).status == 200, "tiny stays loaded after the 403"
        r = s.request("POST", unload, headers=bearer(ADMIN_KEY))
        assert r.status == 200, f"unload with the admin key: expected 200, got {r.status} {r.error()}"
        assert s.get("/v2/models/tiny/ready", headers=bearer(USER_KEY)).status != 200, "tiny unloaded by the admin"
        r = s.request("POST", "/v2/repository/models/tiny/load", headers=bearer(ADMIN_KEY))
        assert r.status == 200, f"load with the admin key: expected 200, got {r.status} {r.error()}"
    finally:
        s.stop()


def test_loadgen_sends_the_key(ctx):
    s = ctx.start_server("--api-key-file", ctx.write("keys", USER_KEY + "\n"))
    try:
        url = f"http://{s.host}:{s.port}"

        def statuses(*extra, env=None):
            run = subprocess.run([ctx.mminfer, "loadgen", "--url", url, "--requests", "3", "--model", "tiny", "--json", *extra],
                                 capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})})
            assert run.returncode == 0, f"loadgen {extra}: exit {run.returncode}: {run.stderr}"
            return json.loads(run.stdout)["total"]["status"]

        assert statuses() == {"401": 3}, "loadgen without a key: every request 401"
        # tiny makes no embeddings (400), but the key got each request past the check.
        for extra, env in ((("--api-key-file", ctx.write("loadgen-key", USER_KEY + "\n")), None), ((), {"MMINFER_API_KEY": USER_KEY})):
            got = statuses(*extra, env=env)
            assert "401" not in got and sum(got.values()) == 3, f"loadgen with the key ({extra or env}): {got}"
    finally:
        s.stop()


def test_cross_origin_and_host(ctx):
    app = "http://app.example"
    s = ctx.start_server("--cors-origin", app)
    try:
        own = f"http://{s.host}:{s.port}"
        # The finding: a page on another site posts a simple (no preflight) request.
        r = s.request("POST", "/v2/repository/models/tiny/unload", body=b"{}",
                      headers={"Content-Type": "text/plain", "Origin": "http://evil.example"})
        assert r.status == 403, f"cross-origin simple POST unload: expected 403, got {r.status} {r.error()}"
        assert s.get("/v2/models/tiny/ready").status == 200, "tiny must stay loaded after a cross-origin unload"
        r = s.post_json("/v2/models/tiny/infer", INFER, headers={"Origin": own})
        assert r.status == 200, f"same-origin POST (the page at /): expected 200, got {r.status} {r.error()}"
        r = s.post_json("/v2/models/tiny/infer", INFER, headers={"Origin": app})
        assert r.status == 200 and r.headers.get("access-control-allow-origin") == app, \
            f"POST from the allowed origin: expected 200 with its Access-Control-Allow-Origin, got {r.status} {r.headers}"
        # DNS rebinding: a name of the attacker's that resolves to 127.0.0.1.
        for path, method in (("/v2/health/live", "GET"), ("/v2/repository/models/tiny/unload", "POST")):
            r = s.request(method, path, headers={"Host": f"rebind.evil.example:{s.port}"})
            assert r.status == 403, f"{method} {path} with a foreign Host on loopback: expected 403, got {r.status}"
        assert s.get("/v2/models/tiny/ready").status == 200, "tiny must stay loaded after the rebinding unload"
        assert s.get("/v2/health/live", headers={"Host": f"localhost:{s.port}"}).status == 200, "Host: localhost is ours"
    finally:
        s.stop()


def test_cors_preflight(ctx):
    app = "https://app.example"
    s = ctx.start_server("--cors-origin", app)
    try:
        ask = {"Origin": app, "Access-Control-Request-Method": "POST",
               "Access-Control-Request-Headers": "authorization, content-type"}
        r = s.request("OPTIONS", "/v1/embeddings", headers=ask)
        h = r.headers
        assert r.status == 204 and h.get("access-control-allow-origin") == app, f"preflight from {app}: got {r.status} {h}"
        assert "POST" in h.get("access-control-allow-methods", ""), f"Allow-Methods: {h}"
        allowed = h.get("access-control-allow-headers", "").lower()
        assert "authorization" in allowed and "content-type" in allowed, f"Allow-Headers: {h}"
        assert "origin" in h.get("vary", "").lower(), f"Vary: Origin expected: {h}"
        r = s.request("OPTIONS", "/v1/embeddings", headers=dict(ask, Origin="https://evil.example"))
        assert "access-control-allow-origin" not in r.headers and r.status >= 400, \
            f"preflight from another origin: expected no CORS headers, got {r.status} {r.headers}"
    finally:
        s.stop()


def test_tls_round_trip(ctx):
    cert, key = os.path.join(ctx.tmp, "cert.pem"), os.path.join(ctx.tmp, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    context = ssl.create_default_context(cafile=cert)
    s = ctx.start_server("--tls-cert", cert, "--tls-key", key, ssl_context=context)
    try:
        r = s.post_json("/v2/models/tiny/infer", INFER)
        assert r.status == 200 and r.json()["outputs"][0]["shape"] == [1, 3], f"infer over TLS: {r.status} {r.body[:200]!r}"
        # Plain HTTP to the TLS port: the connection fails, the server lives on.
        with socket.create_connection((s.host, s.port), timeout=30) as plain:
            plain.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: localhost\r\n\r\n")
            try:
                answer = plain.recv(65536)
            except ConnectionResetError:
                answer = b""
        assert not answer.startswith(b"HTTP/1.1 200"), f"plain HTTP on the TLS port answered: {answer[:80]!r}"
        assert s.alive() and s.get("/v2/health/live").status == 200, "TLS still served after a plain-HTTP client"
    finally:
        s.stop()
    bad = subprocess.run([ctx.mminfer, "serve", "--repository", ctx.repo, "--port", "0", "--tls-cert", cert, "--tls-key", cert],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "TLS private key" in bad.stderr, f"a certificate given as the key: {bad.returncode} {bad.stderr!r}"
    half = subprocess.run([ctx.mminfer, "serve", "--repository", ctx.repo, "--port", "0", "--tls-cert", cert],
                          capture_output=True, text=True, timeout=120)
    assert half.returncode != 0 and "needs both --tls-cert FILE and --tls-key FILE" in half.stderr, \
        f"--tls-cert without --tls-key: {half.returncode} {half.stderr!r}"


def connect_from(source, server, timeout=30):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.bind((source, 0))  # Linux routes all of 127.0.0.0/8 to loopback: a second client address
    sock.connect((server.host, server.port))
    return sock


def ask_health(sock):
    sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: localhost\r\n\r\n")
    return sock.recv(65536)


def test_connection_limit_per_client(ctx):
    limit = 8
    s = ctx.start_server(config={"http": {"max_connections_per_client": limit, "first_request_timeout_ms": 1000,
                                    "idle_timeout_ms": 600000}})
    socks = []
    try:
        # A client that holds its limit in keep-alive connections (each answered once).
        for i in range(limit):
            socks.append(connect_from("127.0.0.3", s))
            answer = ask_health(socks[-1])
            assert answer.startswith(b"HTTP/1.1 200"), f"connection {i + 1} of {limit}: {answer[:60]!r}"
        extra = connect_from("127.0.0.3", s)
        socks.append(extra)
        answer = extra.recv(65536)
        assert answer.startswith(b"HTTP/1.1 429"), f"connection {limit + 1} from one address: expected 429, got {answer[:80]!r}"
        assert extra.recv(65536) == b"", "the refused connection is closed"
        other = connect_from("127.0.0.2", s)
        socks.append(other)
        answer = ask_health(other)
        assert answer.startswith(b"HTTP/1.1 200"), f"another client address still served: {answer[:60]!r}"
        # A connection that never sends is closed after first_request_timeout (1 s), while a
        # connection that was answered once waits its idle_timeout (600 s).
        silent = connect_from("127.0.0.4", s)
        socks.append(silent)
        assert silent.recv(65536) == b"", "a connection that never sent a request is closed"
        time.sleep(1.5)
        answer = ask_health(socks[0])
        assert answer.startswith(b"HTTP/1.1 200"), f"a keep-alive connection after 1.5 s idle: {answer[:60]!r}"
    finally:
        for sock in socks:
            sock.close()
        s.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mminfer", required=True)
    p.add_argument("out")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ctx = Context(args.mminfer, args.out, tmp)
        return run_tests([test_api_keys_and_admin_key, test_loadgen_sends_the_key, test_cross_origin_and_host, test_cors_preflight, test_tls_round_trip,
                          test_connection_limit_per_client], ctx)


if __name__ == "__main__":
    sys.exit(main())
