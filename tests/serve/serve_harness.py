"""What the `mminfer serve` end-to-end tests share: starting the server, HTTP calls, metrics,
and a small runner of named test functions. Standard library only."""
import base64
import http.client
import json
import re
import subprocess
import sys
import threading
import time
import traceback


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # names in lower case
        self.body = body

    def json(self):
        return json.loads(self.body)

    def error(self):
        """The error's message: KServe's {"error": "text"} (/v2) or OpenAI's envelope
        {"error": {"message", "type", "param", "code"}} (/v1); the body as text when neither."""
        try:
            e = self.json().get("error", self.body)
            return str(e.get("message", e)) if isinstance(e, dict) else str(e)
        except (ValueError, AttributeError):
            return self.body.decode("utf-8", "replace")

    def openai_error(self):
        """OpenAI's envelope {"message", "type", "param", "code"}; AssertionError when the body is
        not one."""
        try:
            e = self.json()["error"]
        except (ValueError, KeyError, TypeError):
            raise AssertionError(f"expected OpenAI's error envelope, got {self.body[:200]!r}")
        assert isinstance(e, dict) and set(e) == {"message", "type", "param", "code"}, \
            f"expected OpenAI's error envelope, got {self.body[:200]!r}"
        return e


class Server:
    """`mminfer serve` on a free port, as a child process. With ssl_context it speaks https."""

    def __init__(self, mminfer, repository, config=None, extra=(), ssl_context=None):
        self.ssl_context = ssl_context
        args = [mminfer, "serve", "--repository", repository, "--port", "0"]
        if config:
            args += ["--config", config]
        self.proc = subprocess.Popen(args + list(extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stderr_lines = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        said = []
        for line in self.proc.stdout:  # it may say other things first (what it loads)
            said.append(line)
            m = re.search(r"listening on https?://([^:/]+):(\d+)/", line)
            if m:
                break
        else:
            self.proc.kill()
            raise RuntimeError(f"mminfer serve did not say where it listens: {''.join(said)!r} {''.join(self.stderr_lines)}")
        self.host, self.port = m.group(1), int(m.group(2))
        self.stdout_rest = []
        threading.Thread(target=self._drain_stdout, daemon=True).start()

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def _drain_stdout(self):
        for line in self.proc.stdout:
            self.stdout_rest.append(line)

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def wait_ready(self, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"mminfer serve exited with {self.proc.returncode}: {''.join(self.stderr_lines)}")
            try:
                if self.get("/v2/health/ready", timeout=5).status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"/v2/health/ready did not answer 200 within {timeout} s: {''.join(self.stderr_lines)}")

    def memory_kib(self, field="VmRSS"):
        """VmRSS (resident now) or VmHWM (peak) of the server, in KiB."""
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        raise RuntimeError(f"no {field} in /proc/{self.pid}/status")

    def connection(self, timeout=60):
        if self.ssl_context:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.ssl_context)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=60, conn=None):
        """One request; on its own connection unless `conn` is given."""
        own = conn is None
        c = self.connection(timeout) if own else conn
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
        finally:
            if own:
                c.close()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post_json(self, path, value, headers=None, **kw):
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        return self.request("POST", path, body=json.dumps(value).encode(), headers=h, **kw)

    def metrics(self):
        r = self.get("/metrics")
        assert r.status == 200, f"GET /metrics: expected 200, got {r.status}"
        return parse_metrics(r.body.decode())

    def stop(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait()


def parse_metrics(text):
    """Prometheus text -> {(name, ((label, value), ...)): number}, labels sorted."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$', line)
        if not m:
            raise AssertionError(f"metrics line is not in the text format: {line!r}")
        labels = tuple(sorted(re.findall(r'([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"', m.group(2) or "")))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def metric(metrics, name, **labels):
    """The value of one sample, 0 when it is absent (a counter that never moved)."""
    return metrics.get((name, tuple(sorted(labels.items()))), 0.0)


def data_url(path, mime="image/png"):
    with open(path, "rb") as f:
        return f"data:{mime};base64," + base64.b64encode(f.read()).decode()


def in_threads(n, fn):
    """Runs fn(i) for i < n on n threads started together; returns results (or exceptions)."""
    results = [None] * n
    barrier = threading.Barrier(n)

    def run(i):
        try:
            barrier.wait()
            results[i] = fn(i)
        except Exception as e:  # reported by the caller, with the others
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def run_tests(tests, context):
    """Runs each test in order; prints one line per test and 'N passed, N failed'. A test that
    leaves the server dead stops the run."""
    passed = failed = 0
    for test in tests:
        start = time.monotonic()
        try:
            test(context)
            passed += 1
            print(f"PASS {test.__name__} ({time.monotonic() - start:.1f} s)", flush=True)
        except Exception as e:
            failed += 1
            kind = "" if isinstance(e, AssertionError) else f"{type(e).__name__}: "
            print(f"FAIL {test.__name__}: {kind}{e}", flush=True)
            if not isinstance(e, AssertionError):
                traceback.print_exc(file=sys.stdout)
        server = getattr(context, "server", None)
        if server is not None and not server.alive() and test is not tests[-1]:
            print(f"the server died (exit {server.proc.returncode}); stderr:\n{''.join(server.stderr_lines)}")
            failed += len(tests) - tests.index(test) - 1
            break
    print(f"{passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0

