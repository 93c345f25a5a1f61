"""Videos that failed for a reason in their file, remembered so that the library goes on without them.

The probe, or a later stage that finds its source unusable (``BadVideo`` naming the source), leaves
``<work>/<id>/failed.json``: the one-line reason, the rule, and the fingerprint of the file it read. While the
file keeps that fingerprint, the workflow does not try it again and the library's report lists it with its
reason; once the file changes (a better copy is placed), the record no longer applies and the video converts
again. Deleting the record forces a retry. Failures that are not the file's fault (a full disk, a crash) leave
no record and are retried.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from stereo3d.io.atomic import atomic_output

log = logging.getLogger(__name__)

RECORD_NAME = "failed.json"


def record_path(work: str | Path, video: str) -> Path:
    return Path(work) / video / RECORD_NAME


def record_failure(path: str | Path, reason: str, rule: str, fingerprint: str) -> None:
    """Remember that the file with ``fingerprint`` cannot be converted, and why (``reason``: the one line)."""
    record = {"reason": reason, "rule": rule, "fingerprint": fingerprint}
    with atomic_output(path) as tmp:
        tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def current_failure(path: str | Path, fingerprint: str) -> dict | None:
    """The record at ``path`` if it is about the file as it is now (same fingerprint), else None; a record of
    an earlier version of the file is removed."""
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        log.warning("%s: unreadable failure record, ignored", path)
        return None
    if record.get("fingerprint") == fingerprint:
        return record
    log.info("%s: the file changed since it failed; trying it again", path.parent.name)
    path.unlink(missing_ok=True)
    return None
