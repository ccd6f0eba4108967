"""The batch window engine's state on disk: a snapshot, then deltas, per batch id.

Rewriting the whole state after every micro-batch costs in proportion to the open windows, not
to the batch: with many group keys and small batches the rewrite dominated (1-hour tumbling
`$group`, 1000-row batches, 45k open groups: 103 ms of pickle and fsync per batch, growing with
the groups). So after a batch the engine writes either

* a snapshot, `<id>.state`: `(version, clock, core state)`, the format it always wrote; or
* a delta, `<id>-<base>.delta`, for tumbling and hopping windows: the clock, the windows
  still open, and only the `$group` groups the batch folded into or the documents it
  buffered (`FixedDelta`), applied on top of the state after batch `base`.

A delta is written while the deltas since the last snapshot stay smaller than that snapshot
(and fewer than `MAX_DELTAS`), so reading the state back costs at most about twice the
snapshot, and writes cost about what the batches touch. The state after batch N is its file
and the chain of `base`s below it down to a snapshot. Spark replays an unfinished batch with
its id, which starts from the state before it: so after saving batch N the files kept are
N's chain and its base's chain, and nothing else.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline_stages._windowing.runtime.clock import Clock
from pipeline_stages._windowing.runtime.fixed import FixedState

SNAPSHOT_SUFFIX = ".state"
DELTA_SUFFIX = ".delta"
_SNAPSHOT_VERSION = 1
_DELTA_VERSION = 1
#: Deltas may add up to the last snapshot's size, or this much when that is smaller.
MIN_DELTA_BUDGET = 256 * 1024
MAX_DELTAS = 1000


@dataclass(frozen=True)
class FixedDelta:
    """What a batch changed in a `FixedState`: every field but the window content it left
    alone. `$group` windows hold groups, changed in place: the delta has the groups the batch
    folded into. Other windows hold buffered documents, only ever appended to: the delta has
    the documents the batch appended."""

    min_open: int
    open_starts: tuple[int, ...]
    #: Window start -> {normalised key -> group entry} for the groups the batch folded into.
    groups: dict[int, dict[Any, Any]]
    #: Window start -> the items the batch appended to a buffering window.
    appended: dict[int, list[Any]]

    @classmethod
    def of(
        cls, state: FixedState, touched: set[tuple[int, Any]], lengths: dict[int, int]
    ) -> FixedDelta:
        """The delta of a batch that folded into the `touched` (start, key) groups, or that
        found buffering windows `lengths` long (start -> items) before it."""
        groups: dict[int, dict[Any, Any]] = {}
        for start, norm in touched:
            content = state.windows.get(start)
            if content is not None:  # a window that closed in the batch is gone
                groups.setdefault(start, {})[norm] = content[norm]
        appended = {
            start: content[lengths.get(start, 0) :]
            for start, content in state.windows.items()
            if isinstance(content, list) and len(content) > lengths.get(start, 0)
        }
        return cls(state.min_open, tuple(sorted(state.windows)), groups, appended)

    def apply(self, state: FixedState, empty: Callable[[], Any]) -> None:
        """Turn the state before the batch into the state after it (`empty`: a new window's
        content)."""
        state.min_open = self.min_open
        open_starts = set(self.open_starts)
        for start in [s for s in state.windows if s not in open_starts]:
            del state.windows[start]
        for start in self.open_starts:
            content = state.windows.setdefault(start, empty())
            if start in self.groups:
                content.update(self.groups[start])
            if start in self.appended:
                content.extend(self.appended[start])


def buffered_lengths(state: FixedState | None) -> dict[int, int]:
    """Start -> items of every buffering window (what `FixedDelta.of` compares against)."""
    if state is None:
        return {}
    return {s: len(c) for s, c in state.windows.items() if isinstance(c, list)}


@dataclass(frozen=True)
class _File:
    batch_id: int
    #: The batch whose state a delta applies to; None for a snapshot.
    base: int | None
    size: int

    @property
    def name(self) -> str:
        if self.base is None:
            return f"{self.batch_id:020d}{SNAPSHOT_SUFFIX}"
        return f"{self.batch_id:020d}-{self.base:020d}{DELTA_SUFFIX}"


class StateFiles:
    """The snapshots and deltas in one directory (see the module docstring). Only this object
    writes there, so it lists the directory once and keeps the listing up to date."""

    def __init__(self, directory: Path, empty: Callable[[], Any] = dict) -> None:
        self.directory = directory
        #: A new window's content, for deltas that open one (`InnerRuntime.new_content`).
        self.empty = empty
        self._listing: dict[int, _File] | None = None

    def before(self, batch_id: int) -> tuple[int, Clock, Any] | None:
        """`(id, clock, core state)` after the latest batch saved before `batch_id` (None:
        nothing saved yet)."""
        files = self._files()
        earlier = [n for n in files if n < batch_id]
        if not earlier:
            return None
        latest = max(earlier)
        chain = [files[n] for n in self._chain(latest, files)]
        clock, state = self._read_snapshot(chain[0])
        for file in chain[1:]:
            clock, delta = self._read_delta(file)
            delta.apply(state, self.empty)
        return latest, clock, state

    def save(
        self,
        batch_id: int,
        clock: Clock,
        state: Any,
        *,
        base: int | None,
        delta: FixedDelta | None,
    ) -> int:
        """Save the state after `batch_id`, which started from the state after `base` (None:
        from nothing); a delta when one is given and fits. Returns the bytes the state after
        `batch_id` occupies."""
        files = self._files()
        for number in [n for n in files if n >= batch_id]:  # an earlier attempt, or later
            self._delete(files.pop(number))
        blob, written_base = None, None
        if delta is not None and base is not None and base in files:
            blob = pickle.dumps((_DELTA_VERSION, clock, delta), pickle.HIGHEST_PROTOCOL)
            base_chain = [files[n] for n in self._chain(base, files)]
            pending = sum(f.size for f in base_chain[1:]) + len(blob)
            if (
                pending <= max(base_chain[0].size, MIN_DELTA_BUDGET)
                and len(base_chain) <= MAX_DELTAS
            ):
                written_base = base
            else:
                blob = None
        if blob is None:
            blob = snapshot(clock, state)
        file = _File(batch_id, written_base, len(blob))
        _write(self.directory / file.name, blob)
        files[batch_id] = file
        chain = self._chain(batch_id, files)
        keep = set(chain)
        if base is not None and base in files:
            keep |= set(self._chain(base, files))
        for number in [n for n in files if n not in keep]:
            self._delete(files.pop(number))
        return sum(files[n].size for n in chain)

    # ------------------------------------------------------------------ files

    def _files(self) -> dict[int, _File]:
        if self._listing is None:
            self._listing = {}
            for path in self.directory.iterdir():
                file = _parse(path)
                if file is not None:
                    self._listing[file.batch_id] = file
        return self._listing

    def _delete(self, file: _File) -> None:
        (self.directory / file.name).unlink(missing_ok=True)

    def _chain(self, batch_id: int, files: dict[int, _File]) -> list[int]:
        """The ids whose files make the state after `batch_id`: a snapshot, then deltas."""
        chain = [batch_id]
        while (base := files[chain[-1]].base) is not None:
            if base not in files:
                raise RuntimeError(
                    f"batch window state: the delta of batch {chain[-1]} applies to batch "
                    f"{base}, whose state is missing from {self.directory}"
                )
            chain.append(base)
        return chain[::-1]

    def _read_snapshot(self, file: _File) -> tuple[Clock, Any]:
        return read_snapshot((self.directory / file.name).read_bytes())

    def _read_delta(self, file: _File) -> tuple[Clock, FixedDelta]:
        clock, delta = _unpickle((self.directory / file.name).read_bytes(), _DELTA_VERSION)
        return clock, delta


def snapshot(clock: Clock, state: Any) -> bytes:
    """A snapshot's bytes: the clock and the window core's whole state."""
    return pickle.dumps((_SNAPSHOT_VERSION, clock, state), pickle.HIGHEST_PROTOCOL)


def read_snapshot(blob: bytes) -> tuple[Clock, Any]:
    """`(clock, core state)` from a snapshot's bytes."""
    clock, state = _unpickle(blob, _SNAPSHOT_VERSION)
    return clock, state


def _unpickle(blob: bytes, version: int) -> tuple[Any, ...]:
    """The fields after the version of a snapshot or delta written by this module."""
    found, *fields = pickle.loads(blob)  # noqa: S301 - written by this module
    if found != version:
        raise RuntimeError(f"batch window state version {found} is not {version}")
    return tuple(fields)


def _parse(path: Path) -> _File | None:
    """The state file `path` names (None: not one)."""
    name = path.name
    if name.endswith(SNAPSHOT_SUFFIX):
        number, base = name[: -len(SNAPSHOT_SUFFIX)], None
    elif name.endswith(DELTA_SUFFIX):
        number, _, base_text = name[: -len(DELTA_SUFFIX)].partition("-")
        base = int(base_text)
    else:
        return None
    return _File(int(number), base, path.stat().st_size)


def _write(path: Path, blob: bytes) -> None:
    """Write `blob` to `path` atomically and durably."""
    written = path.with_suffix(".tmp")
    with written.open("wb") as handle:
        handle.write(blob)
        handle.flush()
        os.fsync(handle.fileno())
    written.replace(path)
