"""The depth stage: decoded frames → DA3 on ONNX Runtime → raw depth maps, stored compressed.

Frames come from ffmpeg already scaled to the content size inside the export's width x height (letterbox) or to
that shape itself (resize), so no per-frame resize runs in Python. Batches use the model's dynamic axis; the model
runs on a thread of its own (ONNX Runtime releases the GIL), one batch after another, while the reader's threads
decode and this thread places the next batch and stores the one before. An export
with a sky head marks sky pixels NaN (no finite depth); the store keeps them as its mask.

The stage's settings are a ``DepthSettings``: what a video's depth depends on, built once per video from its config
sections and its probe, shown by the depth rules as their params, read back in the job; its readable serialisation
is the depth key (``stereo3d.workflow.keys.depth_key``: ``da3_small_518x294_u8_letterbox``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stereo3d.defaults import default
from stereo3d.errors import BadModel
from stereo3d.io.decode import FrameReader
from stereo3d.io.mapstore import MapWriter, finished_by, store_lock
from stereo3d.io.resume import job_identity
from stereo3d.models.da3.runtime import DepthModel, placement_for
from stereo3d.models.da3.tiers import FIT_PLACEMENT, export_shape
from stereo3d.progress import Progress
from stereo3d.runtime.sessions import SessionOptions, open_session
from stereo3d.stereo.bars import Area
from stereo3d.stereo.cuts import picture_change, thumbnail

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DepthSettings:
    """What a video's raw depth depends on, and nothing else: the DA3 export (``variant``, its ``size`` as (width,
    height), its input ``contract``: the model the rule hands the job), how the frame is placed in it
    (``placement``: letterbox or resize), the ``picture`` area of the frame inside baked-in bars that the depth
    covers (None: the whole frame), and the ``precision`` of the arithmetic (``runtime.precision``: fast lets the
    device compute in bf16/fp16/TF32, other numbers).

    Resolved from the settings that chose it (``from_sections``: ``da3.size``, ``fit`` and ``aspect_tiers`` pick
    the export for the video's shape), so that settings which change no video's export (a tier no video takes,
    fit aspect vs letterbox for a square video) move no depth. Speed settings (``da3.batch``, the runtime's
    providers and threads) are not part of it: they change no number (every provider's float32 agrees within the
    export's validation tolerance)."""

    variant: str = default("da3.variant")
    size: tuple[int, int] = (default("da3.size"), default("da3.size"))
    contract: str = default("da3.contract")
    placement: str = FIT_PLACEMENT[default("da3.fit")]
    picture: Area | None = None
    precision: str = default("runtime.precision")

    @classmethod
    def from_sections(cls, sections: Mapping[str, Mapping[str, Any]], display: tuple[int, int] | None = None,
                      picture: Area | None = None) -> DepthSettings:  # fmt: skip
        """The settings of a video from its config sections (``da3``, with its sheet row over it; ``runtime``),
        its ``display`` size (needed under ``fit: aspect``) and the ``picture`` area its depth covers (None: the
        whole frame; its size then picks the aspect tier)."""
        da3 = sections["da3"]
        width, height = export_shape(da3, picture.size if picture is not None else display)
        return cls(variant=da3["variant"], size=(width, height), contract=da3["contract"],
                   placement=FIT_PLACEMENT[da3["fit"]], picture=picture,
                   precision=sections["runtime"]["precision"])  # fmt: skip

    def params(self) -> dict[str, Any]:
        """What the depth rules show as their params: the fields, in plain values."""
        return {
            "variant": self.variant,
            "size": list(self.size),
            "contract": self.contract,
            "placement": self.placement,
            "picture": None if self.picture is None else self.picture.as_list(),
            "precision": self.precision,
        }

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> DepthSettings:
        """The inverse of ``params``."""
        width, height = params["size"]
        return cls(variant=params["variant"], size=(int(width), int(height)), contract=params["contract"],
                   placement=params["placement"], picture=Area.of(params["picture"]),
                   precision=params["precision"])  # fmt: skip


def estimate_depth(video: str | Path, probe: dict, model: str | Path, out: str | Path,
                   settings: DepthSettings | None = None, *, batch: int = default("da3.batch"),
                   options: SessionOptions | None = None, start: int = 0,
                   count: int | None = None) -> dict:  # fmt: skip
    """Write raw DA3 depth of frames [start, start + count) of ``video`` to the map store ``out``, through the
    export ``model`` (the one ``settings`` name), ``batch`` frames per call, in a session opened with ``options``
    (None: the CPU-or-best defaults; their precision is the settings'). ``settings`` name the export its key is of
    (``BadModel`` if ``model`` is another: a different size or input contract); None: the export's own, at the
    config's defaults otherwise.

    ``settings.picture``: the area of the frame the depth covers (the picture inside baked-in bars; None: the whole
    frame). It is cut out of each decoded picture before scaling, and it alone is placed in the export: the bars
    cost no model time, and the model never sees their edge as a depth edge.

    The store also carries each frame's picture change against the frame before it (its ``changes`` series;
    the frame before ``start`` is decoded for that alone), from which shot cuts are found later. A job killed
    midway resumes after the last chunk it stored. The store's lock is held throughout (the preview may be
    computing the job's first frames: ``estimate_first_frames``)."""
    job = _DepthJob.open(video, probe, model, out, settings, batch, options, start, count)
    return job.run(job.total)


def estimate_first_frames(video: str | Path, probe: dict, model: str | Path, out: str | Path, frames: int,
                          settings: DepthSettings | None = None, *, batch: int = default("da3.batch"),
                          options: SessionOptions | None = None, start: int = 0,
                          count: int | None = None) -> dict:  # fmt: skip
    """The first ``frames`` frames (a multiple of the store's chunk, less than the job's) of the depth job
    ``estimate_depth`` would run with the same arguments, left in its partial store for that job to continue (the
    preview's depth). Nothing is computed where the job has finished meanwhile."""
    job = _DepthJob.open(video, probe, model, out, settings, batch, options, start, count)
    if not 0 < frames < job.total:
        raise ValueError(f"{frames} first frames must lie inside the job's {job.total} frames")
    return job.run(frames)


def depth_identity(video: str | Path, model: str | Path, start: int, count: int, placement: str, batch: int,
                   picture: Area | None = None) -> dict:  # fmt: skip
    """The identity of the depth job of frames [start, start + count) of the ``picture`` area (None: the whole
    frame) (``stereo3d.io.resume``): what its store records, so that only the same job continues it, and the
    preview knows whether a finished store is current."""
    crop = {} if picture is None else {"picture": picture.as_list()}
    return job_identity([video, model], start=start, count=count, fit=placement, batch=batch, **crop)


@dataclass
class _DepthJob:
    """One depth job: its model session, where its frames go in the export, its range, its store's identity."""

    video: Path
    probe: dict
    model: Path
    out: Path
    session: object
    contract: DepthModel
    placed: object  # stereo3d.models.da3.runtime's placement of the frame in the export
    placement: str
    batch: int
    picture: Area | None
    start: int
    total: int
    opened_s: float

    @property
    def identity(self) -> dict:
        return depth_identity(self.video, self.model, self.start, self.total, self.placement, self.batch, self.picture)

    @classmethod
    def open(cls, video, probe, model, out, settings: DepthSettings | None, batch: int,
             options: SessionOptions | None, start: int, count: int | None) -> _DepthJob:  # fmt: skip
        named = settings
        settings = DepthSettings() if settings is None else settings
        placement, picture = settings.placement, settings.picture
        started = time.perf_counter()
        session = open_session(model, session_options(settings, options))
        contract = DepthModel(session, model)
        opened_s = time.perf_counter() - started
        if named is not None and (contract.shape, contract.input_contract) != (tuple(named.size), named.contract):
            # The job's key names the settings' export: depth of another would be stored under the wrong name.
            (width, height), (w, h) = contract.shape, named.size
            raise BadModel(model, f"an export of {width}x{height} with {contract.input_contract} input, where the "
                                  f"depth settings name {w}x{h} with {named.contract} input (export it again, or "
                                  "remove it for the export rule to remake it)")  # fmt: skip
        info = probe["video"]
        shown = (info["display_width"], info["display_height"]) if picture is None else picture.size
        placed = placement_for(*shown, contract.shape, placement)
        total = info["frame_count"] - start if count is None else count
        return cls(Path(video), probe, Path(model), Path(out), session, contract, placed, placement, batch, picture,
                   start, total, opened_s)  # fmt: skip

    def run(self, end: int) -> dict:
        """Compute the job's frames up to ``end`` (its total, or fewer: left in its partial store), after what an
        earlier attempt stored; under the store's lock."""
        name = self.video.name
        attrs = _store_attrs(self.video, self.model, self.start, self.placement, self.contract, self.placed,
                             self.picture)  # fmt: skip
        store = MapWriter(self.out, "inverse", attrs=attrs, series=("changes",), resume=self.identity,
                          masked=self.contract.has_sky)  # fmt: skip
        with store_lock(self.out):
            if end < self.total and finished_by(self.out, self.identity):  # finished while we waited for the lock
                log.info("%s: frames %d.. are stored in full already: nothing to compute", name, self.start)
                return {"frames": 0, "providers": self.session.get_providers()}
            with store:
                done = min(store.resumed, end)  # frames a killed (or stopped) attempt of this job already stored
                if store.resumed:
                    log.info("%s: resuming depth at frame %d of %d", name, self.start + store.resumed,
                             self.start + self.total)  # fmt: skip
                if end < self.total:
                    log.info("%s: frames %d..%d of the job only, left for the full job to continue", name,
                             self.start, self.start + end - 1)  # fmt: skip
                    store.suspend()
                progress = Progress(log, f"depth {name}", end - done)
                with _Batches(self, store, progress) as batches:
                    self._decode_into(batches, self.start + done, end - done)
        return {"frames": progress.done, "fps": progress.finish(), "providers": self.session.get_providers(),
                "session_open_s": round(self.opened_s, 3),
                "first_batch_s": round(batches.first_batch_s or 0.0, 3)}  # fmt: skip

    def _decode_into(self, batches: _Batches, first: int, count: int) -> None:
        """Decode frames ``first`` .. ``first + count`` (and the one before, for the first picture change) into
        ``batches``."""
        lead = 1 if first > 0 else 0
        size = (self.placed.width, self.placed.height)
        with FrameReader(self.video, self.probe, start=first - lead, count=count + lead, size=size,
                         crop=self.picture) as frames:  # fmt: skip
            previous = None
            for index, frame in enumerate(frames):
                thumb = thumbnail(frame)
                if index >= lead:
                    batches.add(frame, picture_change(previous, thumb) if previous is not None else float("nan"))
                previous = thumb


def session_options(settings: DepthSettings, options: SessionOptions | None) -> SessionOptions:
    """The session's options in the settings' precision: the precision changes the numbers, so it is the settings'
    (and the depth key's), never the session's alone."""
    if options is None:
        return SessionOptions(precision=settings.precision)
    if options.precision != settings.precision:
        raise ValueError(f"the session's precision {options.precision!r} is not the depth settings' "
                         f"{settings.precision!r}")  # fmt: skip
    return options


class _Batches:
    """Frames gathered into the model's batches; a batch never spans two chunks of the store, so a resumed run
    batches as an unbroken one does.

    The model runs on a thread of its own (ONNX Runtime releases Python's lock), one batch after another, while
    this thread places the next batch and stores the one before: on a GPU that work (a few ms a frame at 518)
    otherwise waited for the model and the model for it (P1 on the H200, 2026-12-04: 0.55). Used as a context
    manager: leaving it stores the last batch (or, while an error is raised, waits for the model and drops it)."""

    def __init__(self, job: _DepthJob, store: MapWriter, progress: Progress):
        self.job, self.store, self.progress = job, store, progress
        self.frames: list[np.ndarray] = []
        self.changes: list[float] = []
        self.first_batch_s: float | None = None
        self.handed = store.count  # frames handed to the model: the store's count lags by the batches in flight
        self._model = ThreadPoolExecutor(1, thread_name_prefix="depth-model")
        self._running: tuple[Future, list[float], float] | None = None

    def __enter__(self) -> _Batches:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.flush()
                self._store_running()
            elif self._running is not None:
                wait([self._running[0]])
        finally:
            self._model.shutdown(wait=True)

    def add(self, frame: np.ndarray, change: float) -> None:
        self.frames.append(frame)
        self.changes.append(change)
        # A batch ends where the store's chunk does, so batches are the same whether or not the store was resumed.
        if len(self.frames) == min(self.job.batch, self.store.chunk - self.handed % self.store.chunk):
            self.flush()

    def flush(self) -> None:
        """Hand the gathered frames to the model (it starts them when the batch before is done), then store the
        batch before."""
        if not self.frames:
            return
        feed = self.job.contract.feed(np.stack(self.frames), self.job.placed)
        self.handed += len(self.frames)
        queued = (self._model.submit(self.job.contract.infer, feed), self.changes, time.perf_counter())
        self.frames, self.changes = [], []
        self._store_running()
        self._running = queued

    def _store_running(self) -> None:
        if self._running is None:
            return
        future, changes, started = self._running
        self._running = None
        depth = self.job.contract.depth_of(future.result(), self.job.placed)
        if self.first_batch_s is None:  # a GPU provider's own start-up (TensorRT engine, kernel tuning)
            self.first_batch_s = time.perf_counter() - started
            log.info("%s: session opened in %.2f s, first batch in %.2f s", self.job.video.name, self.job.opened_s,
                     self.first_batch_s)  # fmt: skip
        self.store.append(depth, changes=changes)
        self.progress.advance(len(depth))


def _store_attrs(video: Path, model: Path, start: int, placement: str, contract: DepthModel, placed,
                 picture: Area | None) -> dict:  # fmt: skip
    """What the store says of itself: the source, the model and its contract, where the frame lies in the export."""
    attrs = {
        "video": video.name,
        "start": start,
        "model": model.name,
        "fit": placement,
        "variant": contract.meta.get("variant"),
        "width": contract.shape[0],
        "height": contract.shape[1],
        "contract": contract.input_contract,
        "placement": [placed.x, placed.y, placed.width, placed.height],
        "bars": round(placed.bars, 4),
        "sky": contract.has_sky,
    }
    # The area of the frame (display pixels) the maps cover, where it is not the whole frame (a video without bars
    # keeps its stores' old bytes): readers such as the QC figures follow it.
    if picture is not None:
        attrs["picture"] = picture.as_list()
    return attrs
