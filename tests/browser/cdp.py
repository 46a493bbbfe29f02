"""A minimal Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (standard library only).

Chromium started with ``--remote-debugging-pipe`` reads protocol messages on its file descriptor 3
and writes them on 4, each a JSON object followed by a NUL byte. :class:`Browser` starts it with
those two descriptors wired to pipes, and :class:`Page` drives one tab: navigate, evaluate
JavaScript, send real mouse and keyboard input, take screenshots, and collect every console message,
uncaught exception and failed request the page reports.
"""

from __future__ import annotations

import base64
import fcntl
import itertools
import json
import os
import queue
import subprocess
import tempfile
import threading
import time

# Chromium's flags for a quiet, reproducible, offline headless run. Every host but 127.0.0.1 is
# unresolvable, so a page that still needs the network reports a failed request.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio", "--disable-extensions",
         "--force-color-profile=srgb", "--font-render-hinting=none",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--remote-debugging-pipe"]


class CDPError(RuntimeError):
    pass


class Browser:
    """One headless Chromium process; ``with Browser(exe) as b: page = b.new_page(1280, 900)``."""

    def __init__(self, exe: str, timeout: float = 60.0):
        self.timeout = timeout
        self._profile = tempfile.TemporaryDirectory(prefix="nplm-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire():  # in the child: the read end on fd 3, the write end on fd 4
            a = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={self._profile.name}", "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=wire, close_fds=False)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._ids = itertools.count(1)
        self._replies: dict[int, queue.Queue] = {}
        self._events: dict[str, list] = {}  # sessionId -> events (method, params)
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # ------------------------------------------------------------------ plumbing
    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_chrome, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                for q in list(self._replies.values()):
                    q.put({"error": {"message": "Chromium closed the pipe"}})
                return
            buf += chunk
            *msgs, buf = buf.split(b"\0")
            for raw in msgs:
                msg = json.loads(raw)
                if "id" in msg:
                    q = self._replies.get(msg["id"])
                    if q is not None:
                        q.put(msg)
                else:
                    with self._lock:
                        self._events.setdefault(msg.get("sessionId", ""), []).append((msg["method"], msg.get("params", {})))

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float | None = None) -> dict:
        i = next(self._ids)
        msg = {"id": i, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        q: queue.Queue = queue.Queue()
        self._replies[i] = q
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        try:
            reply = q.get(timeout=timeout or self.timeout)
        except queue.Empty:
            raise CDPError(f"{method}: no reply from Chromium within {timeout or self.timeout:.0f} s") from None
        finally:
            self._replies.pop(i, None)
        if "error" in reply:
            raise CDPError(f"{method}: {reply['error'].get('message')}")
        return reply.get("result", {})

    def events(self, session: str) -> list:
        with self._lock:
            return list(self._events.get(session, []))

    def new_page(self, width: int, height: int, mobile: bool = False) -> "Page":
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        return Page(self, target, session, width, height, mobile)

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except (CDPError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        self._profile.cleanup()

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Page:
    """One tab at a fixed viewport size (CSS pixels, device scale 1); ``mobile``: as a phone's browser
    lays a page out (its viewport meta tag obeyed)."""

    def __init__(self, browser: Browser, target: str, session: str, width: int, height: int, mobile: bool = False):
        self.b, self.target, self.session = browser, target, session
        self.width, self.height, self.mobile = width, height, mobile
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})
        self._seen = 0

    def send(self, method: str, params: dict | None = None, timeout: float | None = None) -> dict:
        return self.b.send(method, params, self.session, timeout)

    def _new_events(self) -> list:
        ev = self.b.events(self.session)
        new, self._seen = ev[self._seen:], len(ev)
        return new

    def goto(self, url: str, timeout: float = 30.0) -> list[str]:
        """Open ``url`` and wait for its load event. Returns the problems the page reported so far."""
        self._new_events()  # forget the previous page's messages
        self.send("Page.navigate", {"url": url})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(m == "Page.loadEventFired" for m, _ in self.b.events(self.session)[self._seen:]):
                return []
            time.sleep(0.05)
        return [f"the page did not finish loading within {timeout:.0f} s"]

    def evaluate(self, expression: str, await_promise: bool = True, timeout: float | None = None):
        """The value of a JavaScript expression (JSON-serialisable); raises CDPError on an exception."""
        res = self.send("Runtime.evaluate", {"expression": expression, "awaitPromise": await_promise,
                                             "returnByValue": True}, timeout)
        if "exceptionDetails" in res:
            d = res["exceptionDetails"]
            raise CDPError(d.get("exception", {}).get("description") or d.get("text", "exception"))
        return res.get("result", {}).get("value")

    def console_problems(self) -> list[str]:
        """Console errors, uncaught exceptions and failed requests since the last call."""
        out = []
        failed = {}
        requests = {}
        for method, p in self._new_events():
            if method == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                text = d.get("exception", {}).get("description") or d.get("text", "")
                out.append(f"uncaught exception: {text.splitlines()[0] if text else '?'} "
                           f"({d.get('url', '')}:{d.get('lineNumber', 0) + 1})")
            elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                args = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
                out.append(f"console.{p['type']}: {args[:200]}")
            elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
                e = p["entry"]
                out.append(f"console error ({e.get('source')}): {e.get('text', '')[:200]} {e.get('url', '')}".rstrip())
            elif method == "Network.requestWillBeSent":
                requests[p["requestId"]] = p["request"]["url"]
            elif method == "Network.loadingFailed" and not p.get("canceled"):
                failed[p["requestId"]] = p.get("errorText", "")
            elif method == "Network.responseReceived" and p["response"].get("status", 200) >= 400:
                failed[p["requestId"]] = f"HTTP {p['response']['status']}"
        out += [f"failed request: {requests.get(r, '?')} ({why})" for r, why in failed.items()]
        return list(dict.fromkeys(out))

    def screenshot(self, clip: dict | None = None) -> bytes:
        """PNG bytes of the viewport, of the whole page (clip='full'), or of a clip rectangle
        {x, y, width, height} in page coordinates."""
        params: dict = {"format": "png", "captureBeyondViewport": True}
        if clip is not None:
            params["clip"] = {**clip, "scale": 1}
        return base64.b64decode(self.send("Page.captureScreenshot", params, timeout=60)["data"])

    def mouse(self, kind: str, x: float, y: float, buttons: int = 0) -> None:
        self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left",
                                               "buttons": buttons, "clickCount": 1})

    def drag(self, x0: float, y0: float, x1: float, y1: float, steps: int = 8) -> None:
        """Press at (x0, y0), move to (x1, y1) in a few steps, release (viewport coordinates)."""
        self.mouse("mouseMoved", x0, y0)
        self.mouse("mousePressed", x0, y0, 1)
        for s in range(1, steps + 1):
            self.mouse("mouseMoved", x0 + (x1 - x0) * s / steps, y0 + (y1 - y0) * s / steps, 1)
        self.mouse("mouseReleased", x1, y1)

    def key(self, key: str, code: str, keycode: int) -> None:
        for kind in ("keyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": code,
                                                 "windowsVirtualKeyCode": keycode})

    def close(self) -> None:
        try:
            self.b.send("Target.closeTarget", {"targetId": self.target}, timeout=10)
        except CDPError:
            pass
