"""Model versions: load an older version (roll back) while requests stream, unload, load again."""
import threading

import numpy as np

from e2e_routes import tiny_expected, tiny_infer

X = np.array([[1.0, -2.0, 0.5, 3.0], [0.25, 0.0, -1.0, 2.0]], np.float32)


class Stream:
    """Threads sending tiny infer requests on keep-alive connections until stopped."""

    def __init__(self, ctx, threads=3):
        self.ctx, self.answers, self.stop_flag = ctx, [], threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run) for _ in range(threads)]
        for t in self.threads:
            t.start()

    def run(self):
        conn = self.ctx.server.connection()
        while not self.stop_flag.is_set():
            try:
                answer = tiny_infer(self.ctx, X, conn=conn)
            except Exception as e:
                answer = (repr(e), None, None)
                conn.close()
            with self.lock:
                self.answers.append(answer)
        conn.close()

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join()
        return self.answers


def load(ctx, name, version=None):
    body = {"parameters": {"version": str(version)}} if version else {}
    return ctx.server.post_json(f"/v2/repository/models/{name}/load", body, timeout=120)


def assert_serves(ctx, version):
    status, served, y = tiny_infer(ctx, X)
    assert status == 200 and served == str(version), f"tiny should serve version {version}, answered {status} {served}"
    np.testing.assert_allclose(y, tiny_expected(ctx, version, X), rtol=1e-5, atol=1e-5,
                               err_msg=f"tiny's answer is not version {version}'s x W + b")
    meta = ctx.server.get("/v2/models/tiny").json()
    assert meta["versions"] == [str(version)], f"metadata should list version {version}, lists {meta['versions']}"


def check_stream(ctx, answers, what):
    assert answers, f"{what}: no request completed while streaming"
    bad = [a[0] for a in answers if a[0] != 200]
    assert not bad, f"{what}: {len(bad)} of {len(answers)} streamed requests failed: {sorted(set(map(str, bad)))}"
    for status, version, y in answers:
        np.testing.assert_allclose(y, tiny_expected(ctx, int(version), X), rtol=1e-5, atol=1e-5,
                                   err_msg=f"{what}: an answer labelled version {version} is not that version's")


def test_rollback_while_streaming(ctx):
    assert_serves(ctx, 2)
    stream = Stream(ctx)
    r = load(ctx, "tiny", 1)
    after = len(stream.answers)
    while len(stream.answers) < after + 20:  # keep streaming past the switch
        threading.Event().wait(0.01)
    answers = stream.stop()
    assert r.status == 200, f"loading tiny version 1: expected 200, got {r.status} {r.error()}"
    check_stream(ctx, answers, "rollback to version 1")
    assert any(a[1] == "1" for a in answers), "no streamed request was answered by version 1 after the rollback"
    assert_serves(ctx, 1)
    assert ctx.server.get("/v2/models/tiny/versions/1").status == 200, "/v2/models/tiny/versions/1 after loading it"
    assert ctx.server.get("/v2/models/tiny/versions/2").status == 404, "version 2 is no longer served: expected 404"

    stream = Stream(ctx)
    r = load(ctx, "tiny", 2)
    answers = stream.stop()
    assert r.status == 200, f"loading tiny version 2 again: expected 200, got {r.status} {r.error()}"
    check_stream(ctx, answers, "roll forward to version 2")
    assert_serves(ctx, 2)


def test_load_of_missing_version_keeps_serving(ctx):
    r = load(ctx, "tiny", 7)
    assert r.status == 404 and "no version 7" in r.error(), f"loading version 7: expected 404 naming it, got {r.status} {r.error()}"
    assert_serves(ctx, 2)
    r = load(ctx, "nope")
    assert r.status == 404 and "nope" in r.error(), f"loading an unknown model: expected 404, got {r.status} {r.error()}"
    assert ctx.server.get("/v2/health/ready").status == 200, "a failed load of an unknown model made the server unready"
    names = [m["name"] for m in ctx.server.post_json("/v2/repository/index", {}).json()]
    assert "nope" not in names, f"a model with no folder should not be listed: {names}"


def test_unload_then_load(ctx):
    s = ctx.server
    r = s.post_json("/v2/repository/models/tiny/unload", {})
    assert r.status == 200, f"unloading tiny: expected 200, got {r.status} {r.error()}"
    r = s.get("/v2/models/tiny")
    assert r.status == 404 and "tiny" in r.error(), f"metadata of an unloaded model: expected 404, got {r.status}"
    status, _, _ = tiny_infer(ctx, X)
    assert status in (404, 503), f"infer on an unloaded model: expected 404 or 503, got {status}"
    assert s.get("/v2/models/tiny/ready").status == 404, "an unloaded model is not ready"
    index = {m["name"]: m for m in s.post_json("/v2/repository/index", {}).json()}
    assert index["tiny"]["state"] == "UNAVAILABLE" and index["tiny"].get("reason") == "unloaded", f"index: {index['tiny']}"
    assert s.get("/v2/health/ready").status == 200, "unloading on purpose must not make the server unready"
    r = s.post_json("/v2/repository/models/tiny/unload", {})
    assert r.status == 404 and "not loaded" in r.error(), f"unloading twice: expected 404, got {r.status} {r.error()}"
    r = load(ctx, "tiny")
    assert r.status == 200, f"loading tiny again: expected 200, got {r.status} {r.error()}"
    assert_serves(ctx, 2)


def slow_requests(ctx, n):
    """Starts n requests to the slow model; returns (threads, answers) once every one of them is
    answered or accepted by the model (running or waiting in its queue)."""
    from e2e_load import slow_body
    from serve_harness import metric

    body, answers = slow_body(), [None] * n

    def client(i):
        try:
            answers[i] = ctx.server.request("POST", "/v2/models/slow/infer", body=body, timeout=120).status
        except Exception as e:
            answers[i] = repr(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    while metric(ctx.server.metrics(), "mminfer_inflight_requests", model="slow") + sum(a is not None for a in answers) < n:
        threading.Event().wait(0.002)
    assert any(a is None for a in answers), "the slow requests all finished before they were seen in flight"
    return threads, answers


def test_reload_and_unload_with_requests_queued(ctx):
    for action in ("load", "unload"):
        threads, answers = slow_requests(ctx, 4)
        r = ctx.server.post_json(f"/v2/repository/models/slow/{action}", {}, timeout=120)
        for t in threads:
            t.join()
        assert r.status == 200, f"{action} of slow: expected 200, got {r.status} {r.error()}"
        assert answers == [200] * 4, f"requests queued on slow when it was {action}ed: expected all 200, got {answers}"
    r = load(ctx, "slow")
    assert r.status == 200 and ctx.server.get("/v2/models/slow").status == 200, "slow should serve again after a load"


TESTS = [test_rollback_while_streaming, test_load_of_missing_version_keeps_serving, test_unload_then_load,
         test_reload_and_unload_with_requests_queued]
