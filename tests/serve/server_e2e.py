#!/usr/bin/python3
"""End-to-end tests of `mminfer serve` over HTTP, on the repository that
tools/make_serve_repository.py writes:

  server_e2e.py --mminfer BIN DIR      (DIR: make_serve_repository.py's OUT)

Starts the server on a free port with short HTTP timeouts and a 1 MiB body limit, runs every
test in order against that one process (routes, versions, bad inputs, load), and ends by sending
SIGTERM while slow requests are in flight: they must still be answered 200 and the exit status
be 0. Prints one line per test, figures seen, and 'N passed, N failed'."""
import argparse
import http.client
import json
import os
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import e2e_bad_inputs  # noqa: E402
import e2e_kserve  # noqa: E402
import e2e_load  # noqa: E402
import e2e_openai  # noqa: E402
import e2e_routes  # noqa: E402
import e2e_versions  # noqa: E402
from serve_harness import Server, metric, run_tests  # noqa: E402

READ_TIMEOUT_MS, IDLE_TIMEOUT_MS, MAX_BODY = 1000, 3000, 1 << 20


class Context:
    def __init__(self, mminfer, out):
        self.mminfer = mminfer
        self.repo = os.path.join(out, "repository")
        with open(os.path.join(out, "inputs", "inputs.json"), encoding="utf-8") as f:
            self.inputs = json.load(f)
        self.read_timeout_s = READ_TIMEOUT_MS / 1000
        self.max_body_bytes = MAX_BODY
        self.figures = {}
        self.server = None


def test_sigterm_finishes_in_flight(ctx):
    s = ctx.server
    kept = s.connection()
    assert s.get("/v2/health/live", conn=kept).status == 200, "a keep-alive connection before SIGTERM"
    body = e2e_load.slow_body()
    # Four: the queue holds them all even before the worker takes the first (capacity 4), so none
    # is refused however the threads are scheduled.
    answers = [None] * 4

    def client(i):
        try:
            answers[i] = s.request("POST", "/v2/models/slow/infer", body=body, timeout=120).status
        except Exception as e:
            answers[i] = repr(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(answers))]
    for t in threads:
        t.start()
    # SIGTERM once all are inside the server (a request it reads after SIGTERM is new work, and
    # is answered 503).
    deadline = time.monotonic() + 30
    # Every request is answered or inside the server (accepted and not yet answered).
    while metric(s.metrics(), "mminfer_inflight_requests", model="slow") + sum(a is not None for a in answers) < len(answers):
        assert time.monotonic() < deadline, f"{len(answers)} slow requests never all reached the server"
        time.sleep(0.002)
    assert not all(a is not None for a in answers), "the slow requests finished before SIGTERM could be sent"
    s.proc.terminate()
    # New connections are refused from now on (once the server has taken the signal). A connect
    # that lands in the backlog as the listener closes is reset rather than refused: the same answer.
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection((s.host, s.port), timeout=5).close()
        except (ConnectionRefusedError, ConnectionResetError):
            break
        assert time.monotonic() < deadline, "the server still accepts connections 30 s after SIGTERM"
        time.sleep(0.005)
    # A request on a connection opened before: 503 with Retry-After while draining, or a close
    # when the server is already gone.
    late = None
    try:
        r = s.get("/v2/health/live", conn=kept, timeout=30)
        late = r.status
        assert r.status == 503 and r.headers.get("retry-after"), f"a request after SIGTERM: expected 503, got {r.status}"
    except (ConnectionError, http.client.HTTPException):
        late = "closed"
    kept.close()
    code = s.proc.wait(120)
    for t in threads:
        t.join()
    assert answers == [200] * len(answers), f"requests in flight at SIGTERM: expected all 200, got {answers}"
    assert code == 0, f"mminfer serve should exit 0 after SIGTERM, exited {code}: {''.join(s.stderr_lines)[-500:]}"
    deadline = time.monotonic() + 10  # the stderr reader may still be on its last lines
    while "SIGTERM" not in "".join(s.stderr_lines) and time.monotonic() < deadline:
        time.sleep(0.05)
    said = "".join(s.stderr_lines)  # a log, so on stderr; stdout holds only where it listens
    assert "SIGTERM" in said, f"the server should say on stderr that it got SIGTERM: {said!r}"
    ctx.figures["sigterm"] = f"{len(answers)} requests in flight answered {answers}; a request after it: {late}; exit {code}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mminfer", required=True)
    ap.add_argument("--rss-growth-mib", type=float, default=256,
                    help="how far the server's RSS may rise under overload (sanitizer builds need more)")
    ap.add_argument("dir", help="make_serve_repository.py's OUT")
    args = ap.parse_args()

    e2e_load.raise_fd_limit(4096)  # 1000 client sockets here and 1000 in the server, which inherits it
    ctx = Context(args.mminfer, args.dir)
    ctx.rss_growth_mib = args.rss_growth_mib
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "serve.json")
        with open(config, "w") as f:
            json.dump({"http": {"read_timeout_ms": READ_TIMEOUT_MS, "idle_timeout_ms": IDLE_TIMEOUT_MS,
                                "max_body_bytes": MAX_BODY}}, f)
        ctx.server = Server(args.mminfer, ctx.repo, config)
        try:
            ctx.server.wait_ready()
            tests = (e2e_routes.TESTS + e2e_openai.TESTS + e2e_versions.TESTS + e2e_bad_inputs.TESTS + e2e_kserve.TESTS + e2e_load.TESTS +
                     [test_sigterm_finishes_in_flight])
            only = os.environ.get("SERVE_E2E_ONLY")  # a comma-separated subset, for debugging
            if only:
                tests = [t for t in tests if t.__name__ in only.split(",")] + [test_sigterm_finishes_in_flight]
            code = run_tests(tests, ctx)
        finally:
            ctx.server.stop()
    for what, figure in ctx.figures.items():
        print(f"figure: {what}: {figure}")
    return code


if __name__ == "__main__":
    sys.exit(main())
