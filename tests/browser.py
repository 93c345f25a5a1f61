"""A headless Chromium for the tests, driven through the Chrome DevTools Protocol over a pipe
(``--remote-debugging-pipe``: JSON messages ending in a NUL byte, commands on the browser's fd 3, replies and events
on its fd 4), so no driver or client package is needed. Debian's ``chromium`` package (``apt-get install chromium``)
or any Chrome/Chromium on PATH; ``find_chromium`` says which, or None.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
# What a test machine's browser must not do: reach the network, update itself, sync, use a GPU it may not have.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--mute-audio",
         "--autoplay-policy=no-user-gesture-required")  # fmt: skip


def find_chromium() -> str | None:
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One headless browser with one page; ``evaluate`` runs JavaScript in the page or in one of its frames."""

    def __init__(self, executable: str, timeout: float = 60.0):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-")
        self._log = open(Path(self.profile) / "stderr.txt", "wb")  # noqa: SIM115 (closed in close)
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()
        # Above 4: the shell's redirections onto 3 and 4 must not overwrite one of the pipes' own descriptors
        # (bash, not sh: dash takes one-digit descriptors only).
        commands_read, replies_write = (_above(fd, 10) for fd in (commands_read, replies_write))
        shell = f'exec "$0" "$@" 3<&{commands_read} 4>&{replies_write}'
        self.process = subprocess.Popen(
            ["bash", "-c", shell, executable, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-pipe",
             "about:blank"],
            pass_fds=(commands_read, replies_write), stdout=subprocess.DEVNULL, stderr=self._log,
        )  # fmt: skip
        os.close(commands_read)
        os.close(replies_write)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []
        page = next(t for t in self.send("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = self.send("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]
        for domain in ("Page", "Runtime"):
            self.send(f"{domain}.enable", session=self.session)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (OSError, RuntimeError, TimeoutError):
            pass
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._commands)
        os.close(self._replies)
        self._log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def send(self, method: str, session: str | None = None, **params) -> dict:
        """Send one command and wait for its reply (events meanwhile go to ``events``)."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def navigate(self, url: str) -> None:
        """Open ``url`` in the page and wait for its load event."""
        self.events.clear()
        self.send("Page.navigate", session=self.session, url=url)
        self.wait_for(lambda: any(e.get("method") == "Page.loadEventFired" for e in self.events))

    def evaluate(self, expression: str, frame_id: str | None = None):
        """The value of ``expression`` (awaited if a promise) in the page, or in its frame ``frame_id`` (of any
        origin: the protocol is not bound by the same-origin rule, as the page's own scripts are)."""
        params = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        if frame_id is not None:
            world = self.send("Page.createIsolatedWorld", session=self.session, frameId=frame_id, worldName="test")
            params["contextId"] = world["executionContextId"]
        result = self.send("Runtime.evaluate", session=self.session, **params)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def frames(self) -> list[dict]:
        """The page's child frames: ``{"id", "url"}`` each (a frame the browser refused shows an error page's URL)."""
        tree = self.send("Page.getFrameTree", session=self.session)["frameTree"]
        return [{"id": child["frame"]["id"], "url": child["frame"].get("url", "")}
                for child in tree.get("childFrames", [])]  # fmt: skip

    def poll(self, check, timeout: float | None = None):
        """``check()`` every 0.1 s until it returns something true, which is returned (TimeoutError after
        ``timeout`` seconds)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            found = check()
            if found:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError("the browser did not get there in time")
            time.sleep(0.1)

    def wait_for(self, done, timeout: float | None = None) -> None:
        """Read events until ``done()`` holds (raises TimeoutError after ``timeout`` seconds)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError("the browser did not get there in time")
            self.events.append(self._read(deadline))

    def _read(self, deadline: float | None = None) -> dict:
        import select

        deadline = deadline or time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._replies], [], [], left)[0]:
                raise TimeoutError("no message from the browser")
            chunk = os.read(self._replies, 1 << 20)
            if not chunk:
                said = (Path(self.profile) / "stderr.txt").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"the browser closed its pipe (exit {self.process.poll()}):\n{said}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)


def _above(fd: int, lowest: int) -> int:
    """``fd`` moved to a descriptor number of at least ``lowest``."""
    import fcntl

    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, lowest)
    os.close(fd)
    return moved


def file_url(path: Path) -> str:
    return Path(path).resolve().as_uri()
