"""Headless Chromium driven through the DevTools protocol, over a minimal WebSocket client
(RFC 6455: client handshake, masked text frames out, fragmented frames, ping and close in).
Standard library only."""
import base64
import hashlib
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
import urllib.request

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class WebSocket:
    def __init__(self, url, timeout=60):
        m = re.match(r"ws://([^:/]+):(\d+)(/.*)", url)
        if not m:
            raise ValueError(f"not a ws:// URL: {url}")
        self.sock = socket.create_connection((m.group(1), int(m.group(2))), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {m.group(3)} HTTP/1.1\r\nHost: {m.group(1)}:{m.group(2)}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("the WebSocket handshake was cut off")
            head += chunk
        head, _, self.buffer = head.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        if " 101 " not in lines[0] + " ":
            raise ConnectionError(f"WebSocket upgrade refused: {lines[0]}")
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        if not any(l.lower().startswith("sec-websocket-accept:") and l.split(":", 1)[1].strip() == accept for l in lines):
            raise ConnectionError("the server's Sec-WebSocket-Accept does not match our key")

    def _send_frame(self, opcode, payload):
        head = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def send(self, text):
        self._send_frame(0x1, text.encode())

    def _read(self, n):
        while len(self.buffer) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the WebSocket was closed")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def _frame(self):
        b0, b1 = self._read(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack(">H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", self._read(8))[0]
        mask = self._read(4) if b1 & 0x80 else None
        payload = self._read(n)
        if mask:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return bool(b0 & 0x80), b0 & 0x0F, payload

    def recv(self):
        """The next text or binary message, joined from its fragments."""
        message = b""
        while True:
            fin, opcode, payload = self._frame()
            if opcode == 0x9:
                self._send_frame(0xA, payload)
            elif opcode == 0x8:
                raise ConnectionError("the WebSocket was closed by the browser")
            elif opcode in (0x0, 0x1, 0x2):
                message += payload
                if fin:
                    return message.decode()

    def close(self):
        try:
            self._send_frame(0x8, b"")
        except OSError:
            pass
        self.sock.close()


class Page:
    """One browser tab: send DevTools commands, collect the events that arrive meanwhile."""

    def __init__(self, ws_url):
        self.ws = WebSocket(ws_url)
        self.next_id = 0
        self.events = []

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"page script failed: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression, timeout=60, what=None):
        """Polls a page expression until it is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout} s for {what or expression}")
            time.sleep(0.05)

    def navigate(self, url, timeout=60):
        self.call("Page.enable")
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'", timeout, f"{url} to load")

    def close(self):
        self.ws.close()


class Chromium:
    """Debian's headless Chromium with a fresh profile and a DevTools port of its choosing."""

    def __init__(self, binary=None):
        binary = binary or shutil.which("chromium") or shutil.which("chromium-browser")
        if not binary:
            raise RuntimeError("no chromium on PATH (scripts/bootstrap installs Debian's chromium)")
        self.profile = tempfile.mkdtemp(prefix="mminfer-chromium-")
        self.proc = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--no-default-browser-check", "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
             f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.port = None
        said = []
        for line in self.proc.stderr:
            said.append(line)
            m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.quit()
            raise RuntimeError("chromium did not open its DevTools port: " + "".join(said[-20:]))
        # Keep reading stderr so the browser never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()

    def page(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=30) as r:
            targets = json.load(r)
        pages = [t for t in targets if t.get("type") == "page"]
        if not pages:
            raise RuntimeError(f"chromium has no page target: {targets}")
        return Page(pages[0]["webSocketDebuggerUrl"])

    def quit(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
