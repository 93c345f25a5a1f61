"""Windows, simulated on Linux (nothing here has run on a real Windows): the package imports and converts a library
with the POSIX-only modules missing, calls no POSIX-only function, names its outputs legally for Windows, reaches
sources where symbolic links are refused, and locks files through a cross-platform library."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stereo3d.demo import samples
from stereo3d.errors import BadVideo
from stereo3d.io import locks
from stereo3d.workflow.library import SAFE, discover, video_id, windows_legal
from stereo3d.workflow.sources import Sources

ROOT = Path(__file__).resolve().parents[1]
MISSING = ROOT / "tests" / "missing"  # sitecustomize.py: makes modules missing in a Python started with it
# The standard library's POSIX-only modules: absent from Windows' Python.
POSIX_ONLY = ("fcntl", "termios", "tty", "pty", "resource", "pwd", "grp", "posix", "syslog", "crypt", "spwd", "nis",
              "readline", "curses", "_posixsubprocess", "_posixshmem")  # fmt: skip
# Attributes of os and signal that Windows' Python lacks, and subprocess arguments it refuses.
POSIX_ONLY_ATTRIBUTES = {
    "os": {"fork", "forkpty", "getuid", "geteuid", "getgid", "getegid", "getpgid", "getpgrp", "setsid", "setpgrp",
           "killpg", "uname", "mkfifo", "sync", "statvfs", "sched_getaffinity", "getloadavg", "nice", "chown",
           "lchown", "O_NOFOLLOW", "O_CLOEXEC", "WNOHANG"},
    "signal": {"SIGKILL", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGCHLD", "SIGPIPE", "SIGSTOP",
               "SIGCONT", "SIGTSTP", "alarm", "pause", "setitimer", "siginterrupt", "pthread_kill"},
}  # fmt: skip
POSIX_ONLY_KEYWORDS = {"preexec_fn", "start_new_session", "process_group", "pass_fds"}
HANG_S = 60  # only so that a broken lock fails instead of hanging the suite


def da3_graph(path: Path, width: int, height: int) -> Path:
    """An ONNX graph with DA3's export contract (uint8 NHWC image → depth), depth = 1 + R/255: a real ONNX Runtime
    session for the conversion, without the minute a real export takes."""
    import onnx
    from onnx import TensorProto, helper

    image = helper.make_tensor_value_info("image", TensorProto.UINT8, ["batch", height, width, 3])
    depth = helper.make_tensor_value_info("depth", TensorProto.FLOAT, ["batch", height, width])
    const = [
        helper.make_tensor("scale", TensorProto.FLOAT, [], [1 / 255]),
        helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]),
        *(helper.make_tensor(n, TensorProto.INT64, [1], [v]) for n, v in (("r0", 0), ("r1", 1), ("ax", 3))),
    ]
    nodes = [
        helper.make_node("Cast", ["image"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["f", "scale"], ["s"]),
        helper.make_node("Slice", ["s", "r0", "r1", "ax"], ["red"]),
        helper.make_node("Squeeze", ["red", "ax"], ["r"]),
        helper.make_node("Add", ["r", "one"], ["depth"]),
    ]
    model = helper.make_model(helper.make_graph(nodes, "da3", [image], [depth], initializer=const),
                              opset_imports=[helper.make_opsetid("", 18)], ir_version=9)  # fmt: skip
    helper.set_model_props(model, {"model": "da3", "contract": "uint8"})
    onnx.save(model, str(path))
    return path


@pytest.fixture(scope="module")
def windows_run(tmp_path_factory) -> dict:
    """tests/missing/windows_run.py in a Python without the POSIX-only modules (to the package): its report."""
    root = tmp_path_factory.mktemp("windows")
    (root / "videos").mkdir()
    samples.make_clip(root / "videos" / "CON.mp4", width=64, height=36, frames=40, audio=True, pattern="testsrc2")
    model = da3_graph(root / "da3.onnx", 70, 42)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(MISSING), str(ROOT)]),
           "STEREO3D_MISSING": ",".join(POSIX_ONLY), "STEREO3D_MISSING_FOR": "stereo3d"}  # fmt: skip
    done = subprocess.run([sys.executable, str(MISSING / "windows_run.py"), str(root), str(model)], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_module_imports_without_the_posix_only_modules(windows_run):
    assert windows_run["armed"], "the package's import of fcntl did not fail: the simulation is not armed"
    imports = windows_run["imports"]
    assert imports["modules"] > 80 and imports["failed"] == {}


def test_a_library_plans_converts_and_resumes_without_them_and_without_symlinks(windows_run):
    conversion = windows_run["conversion"]
    assert conversion["video"] == "CON-b125a9"  # a device name on Windows: its id is not the bare name
    assert conversion["source_is_the_file"] and not conversion["source_is_symlink"]  # a hard link instead
    assert conversion["resumed"]
    assert conversion["frames"] == 40 and conversion["size"] == [128, 36]


def _posix_only_uses(tree: ast.AST) -> list[str]:
    """Uses of POSIX-only attributes and arguments, except under a guard (``try ... except AttributeError``, or
    an ``if`` on ``os.name``, ``sys.platform`` or ``hasattr``)."""
    found = []

    def guarded(node: ast.AST) -> bool:
        if isinstance(node, ast.Try):
            return any("AttributeError" in ast.unparse(h.type) for h in node.handlers if h.type is not None)
        if isinstance(node, ast.If):
            test = ast.unparse(node.test)
            return any(key in test for key in ("os.name", "sys.platform", "hasattr(", "supports_follow_symlinks"))
        return False

    def visit(node: ast.AST, safe: bool) -> None:
        safe = safe or guarded(node)
        if not safe and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.attr in POSIX_ONLY_ATTRIBUTES.get(node.value.id, ()):
                found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
        if not safe and isinstance(node, ast.keyword) and node.arg in POSIX_ONLY_KEYWORDS:
            found.append(f"line {node.value.lineno}: {node.arg}=")
        if not safe and isinstance(node, ast.Call) and ast.unparse(node.func).endswith("get_context"):
            if any(isinstance(a, ast.Constant) and a.value in ("fork", "forkserver") for a in node.args):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        for child in ast.iter_child_nodes(node):
            visit(child, safe)

    visit(tree, False)
    return found


def test_the_package_and_its_scripts_call_nothing_posix_only():
    files = sorted((ROOT / "stereo3d").rglob("*.py")) + sorted((ROOT / "scripts").glob("*.py"))
    found = {}
    for path in files:
        uses = _posix_only_uses(ast.parse(path.read_text(), str(path)))
        if uses:
            found[str(path.relative_to(ROOT))] = uses
    assert not found, f"POSIX-only calls on the product's paths: {found}"
    sample = "import os, signal\nos.getuid()\ntry:\n    os.sched_getaffinity(0)\nexcept AttributeError:\n    pass\n"
    assert _posix_only_uses(ast.parse(sample)) == ["line 2: os.getuid"]  # the scan sees what it looks for


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("beach.mp4", "beach"),  # an ordinary name is its own id, as before
        ("Overture_2024.mkv", "Overture_2024"),
        ("COM10.mp4", "COM10"),  # not a device name
        ("CON.mp4", "CON-b125a9"),
        ("nul.mp4", "nul-952672"),
        ("con.2024.mkv", "con_2024-6e7d43"),  # a device name before a dot is one too
        ("Lpt1.x.mp4", "Lpt1_x-cee1be"),
        ("trailer..mp4", "trailer-1f8bad"),  # Windows drops a trailing dot
        ('a<b>:c|d?e*"f.mp4', "a_b_c_d_e_f-9ed049"),
    ],
)
def test_video_ids_are_legal_file_names_on_windows(name, expected):
    vid = video_id(name)
    assert vid == expected
    assert SAFE.fullmatch(vid) and windows_legal(vid) and windows_legal(f"{vid}_LRF_Full_SBS")
    assert not windows_legal("aux") and not windows_legal("PRN.txt") and not windows_legal("name.")


def test_ids_of_a_windows_library_folder_are_distinct_and_legal(tmp_path):
    for name in ("CON.mp4", "con_2024.mp4", "con.2024.mp4", "Film.mp4"):
        (tmp_path / name).write_bytes(b"x")
    found = discover(tmp_path, [".mp4"])
    assert sorted(found) == ["CON-b125a9", "Film", "con_2024", "con_2024-33e2cc"]


@pytest.fixture
def source(tmp_path) -> Path:
    path = tmp_path / "library" / "film.mp4"
    path.parent.mkdir()
    path.write_bytes(b"video bytes")
    os.utime(path, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    return path


def test_a_hard_link_stands_in_where_symbolic_links_are_refused(tmp_path, source):
    sources = Sources(tmp_path / "work", links=("hardlink",))  # Windows' first choice
    link = sources.link("film", source)
    assert link == tmp_path / "work/film/source.mp4" and not link.is_symlink() and os.path.samefile(link, source)
    assert link.stat().st_mtime_ns == source.stat().st_mtime_ns  # the file itself: its own time
    moved = tmp_path / "moved" / "film.mp4"
    moved.parent.mkdir()
    source.rename(moved)
    assert sources.link("film", moved) == link and os.path.samefile(link, moved)  # still the same file
    replaced = tmp_path / "moved" / "film.mp4"
    replaced.unlink()
    replaced.write_bytes(b"another film")  # a new file under the old name: the link follows it
    assert sources.link("film", replaced) == link and link.read_bytes() == b"another film"
    assert [p.name for p in link.parent.iterdir()] == ["source.mp4"]


def test_without_any_link_the_source_is_read_by_its_own_path(tmp_path, source, caplog):
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("needs a second filesystem for the work folder (a hard link across filesystems fails)")
    work = shm / f"stereo3d-test-{os.getpid()}-{tmp_path.name}"
    try:
        sources = Sources(work, links=("hardlink",))  # another drive: no hard link can be made
        assert sources.link("film", source) == source.resolve()
        assert "no link to the videos can be made" in caplog.text
        braced = source.with_name("film {1}.mp4")
        braced.write_bytes(b"x")
        with pytest.raises(BadVideo, match="Snakemake reads as a pattern"):
            sources.link("film_1-abc123", braced)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _hold(path: str, ready: str) -> None:
    """In a process of its own: take the lock, say so, and hold it until killed."""
    assert locks.try_lock(path) is not None
    Path(ready).write_text("held")
    time.sleep(HANG_S)


def test_a_file_lock_excludes_another_process_and_dies_with_its_holder(tmp_path):
    lock, ready = tmp_path / "a.lock", tmp_path / "ready"
    code = "import sys, test_windows; test_windows._hold(sys.argv[1], sys.argv[2])"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    holder = subprocess.Popen([sys.executable, "-c", code, str(lock), str(ready)], env=env)
    try:
        deadline = time.monotonic() + HANG_S
        while not ready.exists() and holder.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), "the holder never took the lock"
        assert locks.try_lock(lock) is None  # held by the other process
    finally:
        holder.kill()  # TerminateProcess on Windows, SIGKILL here: no clean-up code runs
        holder.wait(HANG_S)
    fd = locks.try_lock(lock)
    assert fd is not None  # the operating system dropped the dead holder's lock
    assert locks.try_lock(lock) is None  # another open file, even in this process, is refused
    locks.unlock(fd)
    with locks.held(lock):
        assert locks.try_lock(lock) is None
    assert (fd := locks.try_lock(lock)) is not None
    locks.unlock(fd)


def test_nvml_counts_the_gpus_where_no_device_nodes_show_them():
    """Windows and WSL2 have no /dev/nvidia<N>: NVML counts the GPUs there. Without a driver (here) it counts none,
    and a library of another name that lacks NVML's functions is passed over."""
    import ctypes.util

    from stereo3d.runtime.devices import nvidia_devices, nvml_device_count

    assert nvml_device_count(("no-such-nvml-library",)) == 0
    assert nvml_device_count((ctypes.util.find_library("c") or "libc.so.6",)) == 0
    assert nvidia_devices() == [] or Path("/dev/nvidia0").exists()
