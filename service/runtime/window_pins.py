"""The window engine a processor's checkpoint runs on, and the operator's bucket count: the
ones it started with.

The operator keeps open windows and the watermark in Spark's state store; the batch engine
(`spark.sluice.window.engine=batch`, `pipeline_stages/_windowing/batch/engine.py`) keeps them in
`WINDOW_STATE_DIR` beside the checkpoint. Neither can resume the other's state: a checkpoint
resumed on the other engine would carry on with no open windows and no watermark, silently.
So the engine is decided when a checkpoint starts, from the Spark conf, and recorded in the
checkpoint (`PIN_FILE`). Changing the conf later applies to new processors and to fresh
starts (a new generation has a new checkpoint), never to a checkpoint being resumed.

A checkpoint written before the record existed is read for evidence: batch-engine state
means the batch engine; Spark offsets without it mean the operator, the default then. With
the Spark checkpoint on a cluster file system (`SLUICE_CHECKPOINT_ROOT`) the offsets are not
local, so such a checkpoint without batch-engine state takes the conf's engine.

The bucket count (`spark.sluice.window.buckets`) is recorded the same way (`BUCKETS_FILE`).
The operator sends a group's rows to bucket `hash(key) mod P` and keeps the group's partial
state in that bucket: resumed with another P, a window's groups would go on in new buckets
while their partials stayed in the old ones, emitted in two halves, or never when their old
bucket gets no rows any more.
A checkpoint written before this record takes the conf's count (nothing in it says).

Whether the operator runs with processing-time timeouts (`TIMERS_FILE`) is recorded too.
Spark stores a timeout column in `applyInPandasWithState`'s state only when the query has
timeouts, so a checkpoint cannot switch. A new checkpoint has them only when a wall-clock rule
needs them (`OperatorSpec.runs_when_idle`): with timeouts, Spark calls the operator's Python
function a second time in every micro-batch, for timed-out state, even when none is due
(~50 ms a batch end to end). A checkpoint started before this record had them.
"""

from __future__ import annotations

from pathlib import Path

from pipeline_stages._windowing.batch.engine import ENGINES

#: The engine recorded in a processor's checkpoint directory.
PIN_FILE = "sluice-window-engine"
#: Where the batch engine keeps its state, inside the processor's checkpoint directory (the
#: driver's disk, even when Spark checkpoints to a cluster file system).
WINDOW_STATE_DIR = "sluice-window-state"
#: The operator's bucket count recorded in a processor's checkpoint directory.
BUCKETS_FILE = "sluice-window-buckets"
#: Whether the operator's query has processing-time timeouts, recorded in the same place.
TIMERS_FILE = "sluice-window-timers"
_TIMERS = {"processingTime": True, "none": False}


class EnginePinError(ValueError):
    """The recorded engine (or bucket count) is not one Sluice can run."""


def checkpoint_engine(checkpoint_dir: Path, configured: str) -> str:
    """The engine to run `checkpoint_dir` on, recorded there on its first start.

    `configured` is the Spark conf's engine; one Sluice does not know is returned unrecorded,
    for the compiler to report."""
    pin = checkpoint_dir / PIN_FILE
    recorded = _recorded(pin, "engine", ENGINES)
    if recorded is not None:
        return recorded
    engine = _evidence(checkpoint_dir) or configured
    if engine in ENGINES:
        _record(pin, engine)
    return engine


def checkpoint_buckets(checkpoint_dir: Path, configured: int) -> int:
    """The operator's bucket count for `checkpoint_dir`, recorded there on its first start
    (`configured`: the Spark conf's count)."""
    pin = checkpoint_dir / BUCKETS_FILE
    if not pin.exists():
        _record(pin, str(configured))
        return configured
    recorded = pin.read_text(encoding="utf-8").strip()
    if not recorded.isdigit() or int(recorded) < 1:
        raise EnginePinError(
            f"{pin} records the window bucket count {recorded!r}; it must be a positive integer"
        )
    return int(recorded)


def checkpoint_timers(checkpoint_dir: Path) -> bool | None:
    """Whether the window operator of `checkpoint_dir` runs with processing-time timeouts:
    the recorded choice; True for a checkpoint started before choices were recorded (they
    always had them); None for a new checkpoint (its pipeline decides: `record_timers`).

    Call it before `checkpoint_engine`, which records the engine of a new checkpoint."""
    recorded = _recorded(checkpoint_dir / TIMERS_FILE, "timers", tuple(_TIMERS))
    if recorded is not None:
        return _TIMERS[recorded]
    started = [checkpoint_dir / PIN_FILE, checkpoint_dir / BUCKETS_FILE]
    if any(path.exists() for path in started) or _evidence(checkpoint_dir) is not None:
        return True
    return None


def record_timers(checkpoint_dir: Path, timers: bool) -> None:
    """Record the timeouts a new checkpoint's window operator starts with."""
    names = {value: name for name, value in _TIMERS.items()}
    _record(checkpoint_dir / TIMERS_FILE, names[timers])


def _recorded(pin: Path, what: str, choices: tuple[str, ...]) -> str | None:
    """The value `pin` records (None: no record); one not among `choices` is an error naming
    the file."""
    if not pin.exists():
        return None
    recorded = pin.read_text(encoding="utf-8").strip()
    if recorded not in choices:
        raise EnginePinError(
            f"{pin} records the window {what} {recorded!r}; it must be one of {', '.join(choices)}"
        )
    return recorded


def _record(pin: Path, value: str) -> None:
    """Write `pin` atomically (a crash leaves no half-written record)."""
    pin.parent.mkdir(parents=True, exist_ok=True)
    written = pin.with_name(f".{pin.name}.tmp")
    written.write_text(value + "\n", encoding="utf-8")
    written.replace(pin)


def _evidence(checkpoint_dir: Path) -> str | None:
    """The engine an unrecorded checkpoint was written by, if it shows."""
    if any((checkpoint_dir / WINDOW_STATE_DIR).glob("*.state")):
        return "batch"
    if any((checkpoint_dir / "offsets").glob("*")):
        return "operator"
    return None
