"""A fork server for the tests' Snakemake runs: ``python -m snakemake`` without paying its start each time.

A new Snakemake process spends about two thirds of a small run's CPU (1.4 s of 2 on two cores) importing
Snakemake and the package modules the Snakefile imports, and the tests start about a hundred of them. The server
(one per pytest worker, ``SnakemakeServer``) imports them once, then forks a child per run. Each child is what
``python -m snakemake ARGS`` would be: a new process with its own session (a timeout kills its whole tree), the
caller's working folder, environment and arguments, stdin from /dev/null, stdout and stderr to files, and the
exit status Snakemake gives. The server itself never runs a workflow, so no run sees another's state.

Tests that kill Snakemake at chosen moments start it as a real process (``harness.snakemake_cmd``).

Protocol, one JSON object per line: the client sends ``{argv, cwd, env, stdout, stderr}``; the server answers
``{"pid": N}`` when the child is started, then ``{"code": C}`` when it has ended.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

COMMON_SMK = Path(__file__).resolve().parents[1] / "workflow" / "rules" / "common.smk"


def preload() -> None:
    """Import Snakemake's command line and the package modules the Snakefile imports (common.smk's)."""
    import snakemake.api  # noqa: F401
    import snakemake.cli  # noqa: F401

    for module in re.findall(r"^from (stereo3d[\w.]*) import", COMMON_SMK.read_text(encoding="utf-8"), re.M):
        __import__(module)


def serve(requests, replies) -> None:
    for line in requests:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)  # never returns
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"code": os.waitstatus_to_exitcode(status)}) + "\n")
        replies.flush()


def _child(request: dict) -> None:
    code = 1
    try:
        os.setsid()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for fd, path, flags in (
            (0, os.devnull, os.O_RDONLY),
            (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
            (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        ):
            opened = os.open(path, flags, 0o644)
            os.dup2(opened, fd)
            os.close(opened)
        # As `python -m snakemake` has them: the arguments, and the working folder first on the module path.
        from snakemake.cli import main

        sys.argv = [importlib.util.find_spec("snakemake.__main__").origin, *request["argv"]]  # found, not run
        sys.path[0] = os.getcwd()

        try:
            main()
            code = 0
        except SystemExit as exit:
            code = _exit_code(exit.code)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _exit_code(value) -> int:
    """The status Python gives ``sys.exit(value)``."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)
    return 1


class SnakemakeServer:
    """The client: ``run(argv, timeout)`` as ``subprocess.run([python, -m, snakemake, *argv])`` would, output
    captured; the server is started on first use and restarted if it is gone."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._buffer = b""
        self._folder = Path(tempfile.mkdtemp(prefix="snakemake-server-"))  # the runs' output, each in turn

    def run(self, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
        out, err = self._folder / "stdout", self._folder / "stderr"
        request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "stdout": str(out), "stderr": str(err)}
        server = self._server()
        server.stdin.write((json.dumps(request) + "\n").encode())
        server.stdin.flush()
        pid = self._reply(None)["pid"]
        try:
            code = self._reply(timeout)["code"]
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):  # it may have ended a moment ago
                os.killpg(pid, signal.SIGKILL)
            self._reply(None)
            raise subprocess.TimeoutExpired(["snakemake", *argv], timeout) from None
        except BaseException:  # interrupted: stop the run and the server, whose replies are now out of step
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            self._proc.kill()
            self._proc = None
            raise
        return subprocess.CompletedProcess([sys.executable, "-m", "snakemake", *argv], code, _text(out), _text(err))

    def close(self) -> None:
        if self._proc is not None:
            self._proc.stdin.close()
            self._proc.wait(timeout=30)
            self._proc = None
        shutil.rmtree(self._folder, ignore_errors=True)

    def _server(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          bufsize=0)  # fmt: skip
            self._buffer = b""
        return self._proc

    def _reply(self, timeout: float | None) -> dict:
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            if not select.select([fd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired("snakemake", timeout)
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"the Snakemake fork server ended (status {self._proc.wait()})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


if __name__ == "__main__":
    preload()
    serve(sys.stdin, sys.stdout)
