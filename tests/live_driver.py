"""Drive headless Chromium over the DevTools protocol, for pages whose scripts take real time (the live model).

tests/browser.py dumps the DOM after a budget of *virtual* time, which suits views that draw at once.
The live model loads ~100 MB and computes in a Web Worker for seconds of real time, so this driver
keeps one Chromium open and awaits promises in the page instead (the DevTools protocol over a pipe,
standard library only):

    with Chromium() as browser:
        page = browser.open(url)
        result = page.evaluate("llmlabLive.run('Hello').then(r => r.ids)")
        browser.renderer_peak_bytes()        # peak resident memory of the page's renderer process

Also `static_server(folder)`: a local HTTP server for a folder, as a context manager yielding its URL.
"""
from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time

from browser import BASE_FLAGS, OFFLINE_FLAGS, find_chromium


class PageError(RuntimeError):
    """An exception thrown (or a promise rejected) by JavaScript evaluated in the page."""


class Page:
    def __init__(self, browser: "Chromium", session: str):
        self.browser, self.session = browser, session

    def evaluate(self, expression: str, timeout: float = 120.0):
        """Evaluate `expression` (awaiting it if it is a promise) and return its JSON value."""
        reply = self.browser.send("Runtime.evaluate", dict(expression=expression, awaitPromise=True,
                                                           returnByValue=True), self.session, timeout)
        if "exceptionDetails" in reply:
            details = reply["exceptionDetails"]
            message = details.get("exception", {}).get("description") or details.get("text")
            raise PageError(message)
        return reply["result"].get("value")

    def navigate(self, url: str, timeout: float = 60.0):
        """Go to `url` in this tab (the page left may stay in the back/forward cache); waits for its load."""
        self.browser.send("Page.navigate", dict(url=url), self.session)
        self._arrived(url, timeout)

    def back(self, url: str, timeout: float = 60.0):
        """The browser's "back" button, to the page at `url`."""
        history = self.browser.send("Page.getNavigationHistory", session=self.session)
        entry = history["entries"][history["currentIndex"] - 1]
        self.browser.send("Page.navigateToHistoryEntry", dict(entryId=entry["id"]), self.session)
        self._arrived(url, timeout)

    def _arrived(self, url: str, timeout: float):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:                                   # the page being left may answer, or vanish, meanwhile
                if self.evaluate(f"document.readyState === 'complete' && location.href === {json.dumps(url)}", 10):
                    return
            except (PageError, RuntimeError, TimeoutError):
                pass
            time.sleep(0.1)
        raise TimeoutError(f"the tab did not arrive at {url} within {timeout} s")

    def wait_for(self, expression: str, timeout: float = 60.0, poll: float = 0.1):
        """Poll until `expression` is truthy; returns its value."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(poll)
        raise TimeoutError(f"{expression!r} stayed falsy for {timeout} s")


class Chromium:
    """One headless Chromium, driven through --remote-debugging-pipe (fd 3 in, fd 4 out)."""

    def __init__(self, offline: bool = True, width: int = 1000, height: int = 800, loopback: bool = False):
        """offline: close the network; loopback: but let 127.0.0.1 through (for `static_server`)."""
        flags = list(OFFLINE_FLAGS) if offline else []
        if offline and loopback:
            flags = [f for f in flags if not f.startswith(("--proxy-bypass-list", "--host-resolver-rules"))]
            flags += ["--proxy-bypass-list=127.0.0.1", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
        self.profile = tempfile.mkdtemp(prefix="llmlab-live-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        args = [find_chromium(), *BASE_FLAGS, *flags, "--remote-debugging-pipe",
                f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"]
        self.proc = subprocess.Popen(["bash", "-c", f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w}', *args],
                                     pass_fds=(to_chrome_r, from_chrome_w), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.console: list[str] = []
        self._replies: dict[int, queue.Queue] = {}
        self._next = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _drain_stderr(self):
        for line in self.proc.stderr:
            if "CONSOLE" in line or "Uncaught" in line:
                self.console.append(line.strip())

    def _read(self):
        buffer = b""
        while True:
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "id" in message and message["id"] in self._replies:
                    self._replies[message["id"]].put(message)
                elif message.get("method") == "Runtime.exceptionThrown":
                    self.console.append("Uncaught " + json.dumps(message["params"]["exceptionDetails"])[:500])
                elif message.get("method") == "Runtime.consoleAPICalled":
                    args = message["params"]["args"]
                    self.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in args))

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 60.0):
        with self._lock:
            self._next += 1
            request = self._next
            self._replies[request] = queue.Queue()
        message = dict(id=request, method=method, params=params or {})
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        try:
            reply = self._replies[request].get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"Chromium did not answer {method} within {timeout} s") from None
        finally:
            del self._replies[request]
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def open(self, url: str, timeout: float = 60.0) -> Page:
        """A new tab at `url`, once its load event has fired."""
        target = self.send("Target.createTarget", dict(url="about:blank"))["targetId"]
        session = self.send("Target.attachToTarget", dict(targetId=target, flatten=True))["sessionId"]
        self.send("Runtime.enable", session=session)
        self.send("Page.enable", session=session)
        self.send("Page.navigate", dict(url=url), session=session)
        page = Page(self, session)
        page.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'", timeout)
        return page

    def _renderer_memory(self, field: str):
        """`field` of /proc/PID/status (VmHWM, VmRSS), in bytes, for each of this browser's renderer processes."""
        for pid in _descendants(self.proc.pid):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"--type=renderer" not in f.read():
                        continue
                with open(f"/proc/{pid}/status") as f:
                    yield sum(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))
            except OSError:
                continue

    def renderer_peak_bytes(self) -> int:
        """The largest peak resident memory (VmHWM) among this browser's renderer processes."""
        return max(self._renderer_memory("VmHWM"), default=0)

    def renderer_bytes(self) -> int:
        """The resident memory (VmRSS) of this browser's renderer processes now, added up."""
        return sum(self._renderer_memory("VmRSS"))

    def close(self):
        with contextlib.suppress(Exception):
            self.send("Browser.close", timeout=5)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=10)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _descendants(pid: int) -> list[int]:
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        for child in children.get(current, []):
            out.append(child)
            todo.append(child)
    return out


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def static_server(folder):
    """Serve `folder` on 127.0.0.1 (a free port) while the block runs; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=os.fspath(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
