"""Many clients at once: single-flight and no-cache through /metrics, dynamic batching, 1000
keep-alive connections, and overload of a slow model with a bounded queue."""
import json
import resource
import socket
import threading
import time

import numpy as np

from serve_harness import data_url, in_threads, metric

IMAGE = dict(model="clip", queue="image")


def image_counts(ctx):
    """(items computed, batches run, batches of size 1) by clip's image queue so far."""
    m = ctx.server.metrics()
    return (metric(m, "mminfer_batch_size_sum", **IMAGE), metric(m, "mminfer_batches_total", **IMAGE),
            metric(m, "mminfer_batch_size_bucket", le="1", **IMAGE))


def cache_counts(ctx):
    m = ctx.server.metrics()
    return metric(m, "mminfer_cache_hits_total"), metric(m, "mminfer_cache_misses_total")


def embed_image(ctx, path, no_cache=False):
    headers = {"Cache-Control": "no-cache"} if no_cache else {}
    r = ctx.server.post_json("/v1/embeddings", {"model": "clip", "input": [{"image": data_url(path)}]}, headers=headers)
    assert r.status == 200, f"embedding {path}: expected 200, got {r.status} {r.error()}"
    return r.json()["data"][0]["embedding"]


def delta(after, before):
    return tuple(a - b for a, b in zip(after, before))


def test_single_flight_and_no_cache(ctx):
    image = ctx.inputs["fresh_images"][0]
    before = image_counts(ctx)
    hits0, misses0 = cache_counts(ctx)
    results = in_threads(16, lambda i: embed_image(ctx, image))
    errors = [r for r in results if isinstance(r, Exception)]
    assert not errors, f"identical concurrent requests failed: {errors[:3]}"
    assert all(r == results[0] for r in results), "identical requests got different embeddings"
    items, batches, _ = delta(image_counts(ctx), before)
    assert items == 1 and batches == 1, f"16 identical concurrent requests: expected 1 computation, the image queue ran " \
                                        f"{items:.0f} items in {batches:.0f} batches"
    hits1, misses1 = cache_counts(ctx)
    assert misses1 > misses0, "the first lookup of a new image should count a cache miss"

    before = image_counts(ctx)
    assert embed_image(ctx, image) == results[0], "the cached embedding differs"
    assert cache_counts(ctx)[0] > hits1, "a repeated image should count a cache hit"
    assert delta(image_counts(ctx), before)[0] == 0, "a cached image was computed again"

    before = image_counts(ctx)
    for _ in range(2):
        embed_image(ctx, image, no_cache=True)
    concurrent = in_threads(4, lambda i: embed_image(ctx, image, no_cache=True))
    assert not [r for r in concurrent if isinstance(r, Exception)], f"no-cache requests failed: {concurrent}"
    items = delta(image_counts(ctx), before)[0]
    assert items == 6, f"6 requests with Cache-Control: no-cache should compute 6 times, computed {items:.0f}"
    ctx.figures["single-flight"] = "16 identical concurrent requests -> 1 computation; 6 no-cache -> 6"


def test_dynamic_batching(ctx):
    images = ctx.inputs["fresh_images"][1:17]
    before = image_counts(ctx)
    results = in_threads(len(images), lambda i: embed_image(ctx, images[i]))
    errors = [r for r in results if isinstance(r, Exception)]
    assert not errors, f"concurrent image embeddings failed: {errors[:3]}"
    items, batches, singles = delta(image_counts(ctx), before)
    assert items == 16, f"16 new images should be computed once each, the queue ran {items:.0f}"
    assert batches - singles >= 1, f"16 concurrent images ran in {batches:.0f} batches, none larger than 1"
    ctx.figures["batching"] = f"16 concurrent images -> {batches:.0f} batches ({singles:.0f} of size 1)"


def raise_fd_limit(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need or soft == resource.RLIM_INFINITY:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, need))  # root may raise the hard limit
            return
        except (ValueError, OSError):
            raise SystemExit(f"RLIMIT_NOFILE hard limit is below the {need} descriptors the 1000-connection test needs")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def read_response(sock, buffer=b""):
    """(status, rest of the buffer) of one HTTP response with a Content-Length body."""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the headers")
        buffer += chunk
    head, _, rest = buffer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed inside the body")
        rest += chunk
    return int(lines[0].split()[1]), rest[length:]


def test_thousand_keepalive_connections(ctx):
    n = 1000
    socks = []
    try:
        for _ in range(n):
            socks.append(socket.create_connection((ctx.server.host, ctx.server.port), timeout=60))
        request = b"GET /v2/health/live HTTP/1.1\r\nHost: localhost\r\n\r\n"
        for round_ in (1, 2):  # the second round proves every connection was kept alive
            for s in socks:
                s.sendall(request)
            statuses = [read_response(s)[0] for s in socks]
            bad = [st for st in statuses if st != 200]
            assert not bad, f"round {round_}: {len(bad)} of {n} connections were not answered 200: {set(bad)}"
        open_now = metric(ctx.server.metrics(), "mminfer_open_connections")
        assert open_now >= n, f"/metrics counts {open_now:.0f} open connections while the test holds {n}"
        ctx.figures["connections"] = f"{n} keep-alive connections, 2 requests each, all 200; server counted {open_now:.0f} open"
    finally:
        for s in socks:
            s.close()


def test_connection_limit_gets_503(ctx):
    """A server of its own holding only `tiny`, with max_connections 4: the 5th connection is
    answered 503 with Retry-After and closed, and a slot freed is taken again."""
    import os
    import tempfile

    from serve_harness import Server

    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "repo"))
        os.symlink(os.path.join(ctx.repo, "tiny"), os.path.join(tmp, "repo", "tiny"))
        with open(os.path.join(tmp, "serve.json"), "w") as f:
            json.dump({"http": {"max_connections": 4, "max_connections_per_client": 4}}, f)  # the total limit, not the per-client one
        server = Server(ctx.mminfer, os.path.join(tmp, "repo"), os.path.join(tmp, "serve.json"))
        socks = []
        try:
            server.wait_ready()
            request = b"GET /v2/health/live HTTP/1.1\r\nHost: localhost\r\n\r\n"

            def connect():
                socks.append(socket.create_connection((server.host, server.port), timeout=30))
                socks[-1].sendall(request)
                return socks[-1].recv(65536)

            # The 4 allowed, once the server has seen earlier connections (wait_ready's) close.
            deadline = time.monotonic() + 30
            while True:
                answers = [connect() for _ in range(4)]
                if all(a.startswith(b"HTTP/1.1 200") for a in answers):
                    break
                assert time.monotonic() < deadline, f"4 connections allowed: got {[a[:40] for a in answers]!r}"
                while socks:
                    socks.pop().close()
                time.sleep(0.05)
            for i in (5, 6):
                answer = connect()
                assert answer.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in answer, \
                    f"connection {i} over the limit of 4: expected 503 with Retry-After, got {answer[:120]!r}"
            socks.pop(0).close()
            deadline = time.monotonic() + 30
            while True:  # the freed slot is counted once the server has seen the close
                s = socket.create_connection((server.host, server.port), timeout=30)
                s.sendall(request)
                answer = s.recv(65536)
                s.close()
                if answer.startswith(b"HTTP/1.1 200"):
                    break
                assert time.monotonic() < deadline, "a closed connection's slot was never given to a new one"
                time.sleep(0.05)
        finally:
            for s in socks:
                s.close()
            server.stop()


class RssSampler:
    """Samples the server's VmRSS every few milliseconds; `peak` is the highest seen."""

    def __init__(self, server):
        self.server, self.peak, self.stop_flag = server, server.memory_kib(), threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        while not self.stop_flag.is_set():
            try:
                self.peak = max(self.peak, self.server.memory_kib())
            except (OSError, RuntimeError):
                return
            time.sleep(0.005)

    def stop(self):
        self.stop_flag.set()
        self.thread.join()
        return self.peak


# The overload's memory bound (server_e2e.py --rss-growth-mib, 256 by default). After a warm-up
# run, each of the 256 connections holds at most one ~20 KB request and its answer, and the slow
# model's queue at most 4 parsed requests: a few MiB in all. 256 MiB leaves room for allocator
# slack and still fails if requests were queued without bound or connections leaked memory.


def slow_body():
    x = np.linspace(-1, 1, 1024, dtype=np.float32)
    return json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1024], "data": x.tolist()}]}).encode()


def test_overload_at_concurrency_256(ctx):
    body = slow_body()
    # One run first, so the baseline holds the model's memory plan and packed weights.
    r = ctx.server.request("POST", "/v2/models/slow/infer", body=body, headers={"Content-Type": "application/json"})
    assert r.status == 200, f"a lone request to the slow model: expected 200, got {r.status} {r.error()}"
    baseline = ctx.server.memory_kib()
    sampler = RssSampler(ctx.server)

    def client(i):
        conn, answers = ctx.server.connection(timeout=120), []
        for _ in range(2):
            r = ctx.server.request("POST", "/v2/models/slow/infer", body=body,
                                   headers={"Content-Type": "application/json"}, conn=conn)
            answers.append((r.status, r.headers.get("retry-after"), r.error() if r.status != 200 else ""))
        conn.close()
        return answers

    results = in_threads(256, client)
    peak = sampler.stop()
    errors = [r for r in results if isinstance(r, Exception)]
    assert not errors, f"{len(errors)} clients got no HTTP answer: {errors[:3]}"
    answers = [a for r in results for a in r]
    counts = {}
    for status, _, _ in answers:
        counts[status] = counts.get(status, 0) + 1
    assert set(counts) <= {200, 429, 503}, f"overload answered other statuses than 200/429/503: {counts}"
    assert counts.get(200, 0) >= 1, f"no request got through the overload: {counts}"
    assert counts.get(429, 0) + counts.get(503, 0) >= 1, f"256 clients on a queue of 4 should see refusals: {counts}"
    no_retry = [a for a in answers if a[0] in (429, 503) and not a[1]]
    assert not no_retry, f"{len(no_retry)} refusals without Retry-After"
    refused = next(a for a in answers if a[0] == 429)
    assert "queue" in refused[2] and "slow" in refused[2], f"a 429 should name the full queue and model: {refused[2]!r}"
    assert ctx.server.alive() and ctx.server.get("/v2/health/live").status == 200, "the server should survive the overload"
    growth = peak - baseline
    ctx.figures["overload"] = (f"statuses {dict(sorted(counts.items()))}; VmRSS {baseline / 1024:.0f} MiB before, peak "
                               f"{peak / 1024:.0f} MiB (+{growth / 1024:.1f} MiB)")
    assert growth < ctx.rss_growth_mib * 1024, f"RSS grew by {growth / 1024:.0f} MiB under overload, bound {ctx.rss_growth_mib} MiB"


def test_embeddings_overload_gets_429(ctx):
    clip = next(c for c in ctx.inputs["audio_clips"] if "short" in c)
    body = {"model": "audio", "input": [{"audio": data_url(clip, "audio/wav")}]}

    def client(i):
        r = ctx.server.post_json("/v1/embeddings", body, headers={"Cache-Control": "no-cache"}, timeout=120)
        # A refusal reaches OpenAI's clients in their envelope, as a rate limit they may retry.
        kind = (r.openai_error()["type"], r.openai_error()["code"]) if r.status != 200 else None
        return r.status, r.headers.get("retry-after"), r.error() if r.status != 200 else "", kind

    answers = in_threads(64, client)
    errors = [a for a in answers if isinstance(a, Exception)]
    assert not errors, f"{len(errors)} clients got no HTTP answer: {errors[:3]}"
    counts = {}
    for status, *_ in answers:
        counts[status] = counts.get(status, 0) + 1
    assert set(counts) <= {200, 429}, f"64 audio embeddings on a queue of 2: expected only 200 and 429, got {counts}"
    assert counts.get(200, 0) >= 1 and counts.get(429, 0) >= 1, f"expected both answers and refusals: {counts}"
    refused = [a for a in answers if a[0] == 429]
    assert all(a[1] for a in refused), "every 429 needs Retry-After"
    assert "queue" in refused[0][2] and "'audio" in refused[0][2], f"the 429 should name the model's full queue: {refused[0][2]!r}"
    kinds = {a[3] for a in refused}
    assert kinds == {("rate_limit_error", "rate_limit_exceeded")}, f"a 429's envelope: expected rate_limit_error, got {kinds}"
    ctx.figures["embeddings overload"] = f"64 concurrent audio embeddings on a queue of 2: {dict(sorted(counts.items()))}"


TESTS = [test_single_flight_and_no_cache, test_embeddings_overload_gets_429, test_dynamic_batching,
         test_thousand_keepalive_connections, test_connection_limit_gets_503, test_overload_at_concurrency_256]
