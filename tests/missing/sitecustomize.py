"""Makes modules missing in this Python process and its children, to rehearse another machine here: Windows (whose
Python has no ``fcntl``, ``termios``, ``pwd``, ...) or a GPU lease whose image lacks packages until they are carried.

Python imports ``sitecustomize`` at start-up from its path, so putting this folder first on ``PYTHONPATH`` arms it
in every process that inherits the environment (Snakemake's jobs too):

* ``STEREO3D_MISSING``: comma-separated top-level module names that cannot be imported (``ModuleNotFoundError``,
  as where they are not installed); ``importlib.util.find_spec`` finds none of them, and ``pkgutil.iter_modules``
  lists none.
* ``STEREO3D_MISSING_FOR`` (optional): comma-separated packages whose own modules are refused them (``stereo3d``);
  other importers get them. That is how Windows looks from inside a package: its own code must not import a
  POSIX-only module, while a library such as filelock imports ``fcntl`` on Linux only, and its Windows branch is
  its maintainers' to test. Without it, every importer is refused.
"""

from __future__ import annotations

import builtins
import importlib.abc
import importlib.util
import os
import pkgutil
import sys

MISSING = frozenset(name for name in os.environ.get("STEREO3D_MISSING", "").split(",") if name)
FOR = tuple(name for name in os.environ.get("STEREO3D_MISSING_FOR", "").split(",") if name)


def _refused(name: str, importer: str | None) -> bool:
    if name.partition(".")[0] not in MISSING:
        return False
    if not FOR:
        return True
    importer = importer or ""
    return any(importer == package or importer.startswith(package + ".") for package in FOR)


def _missing(name: str) -> ModuleNotFoundError:
    return ModuleNotFoundError(f"No module named {name!r} (made missing by tests/missing)", name=name)


class _Finder(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path``: a missing module is not found by anyone (every importer mode)."""

    def find_spec(self, name, path=None, target=None):
        if _refused(name, None):
            raise _missing(name)
        return None


_import = builtins.__import__


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    # An import statement asks sys.modules before any finder: a module imported already (by the standard library,
    # say) is refused here, by who asks.
    if level == 0 and _refused(name, (globals or {}).get("__name__")):
        raise _missing(name)
    return _import(name, globals, locals, fromlist, level)


_find_spec = importlib.util.find_spec


def _guarded_find_spec(name, package=None):
    if not FOR and _refused(name, None):
        return None
    return _find_spec(name, package)


_iter_modules = pkgutil.iter_modules


def _guarded_iter_modules(path=None, prefix=""):
    for info in _iter_modules(path, prefix):
        if FOR or not _refused(info.name[len(prefix) :], None):
            yield info


if MISSING:
    builtins.__import__ = _guarded_import
    if not FOR:
        sys.meta_path.insert(0, _Finder())
        importlib.util.find_spec = _guarded_find_spec
        pkgutil.iter_modules = _guarded_iter_modules
