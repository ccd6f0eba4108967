"""What the API shows of a processor: its Atlas-style stats and its status.

Read-only: the lifecycle (`manager.processors`) owns the records and the runs; this view
reads a processor's live stats while its query runs in this service, else the persisted
ones, and says what a STARTED processor is doing (`starting`, `recovering` with a
`statusDetail`, `running`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from pipeline_stages import parse_pipeline
from pipeline_stages._base import PipelineInvalid
from service.config.settings import Settings
from service.manager.runs import Run, RunTable, retry_count
from service.manager.states import STATUS, State
from service.manager.stats import LiveStats
from service.runtime.engine import Engine
from service.stores import ProcessorError, ProcessorRecord, StatsStore


class ProcessorView:
    """A processor's stats and status (see the module docstring)."""

    def __init__(
        self,
        *,
        runs: RunTable,
        stats_ledgers: StatsStore,
        engine: Engine,
        settings: Settings,
        resuming: Callable[[str], bool],
    ) -> None:
        self.runs = runs
        self._stats_ledgers = stats_ledgers
        self._engine = engine
        self._settings = settings
        #: Whether a processor STARTED when the service started is still being resumed.
        self._resuming = resuming

    def live_stats(self, record: ProcessorRecord) -> LiveStats:
        """The processor's stats: live while it runs here, else as persisted."""
        run = self.runs.get(record.id)
        if run is not None:
            return run.stats
        ledger = self._stats_ledgers.get(record.id)
        return LiveStats(record.stats, generation=record.generation, ledger=ledger)

    def stats(
        self, record: ProcessorRecord, *, verbose: bool = False, scale: int = 1
    ) -> dict[str, Any]:
        """Atlas's stats object for a processor."""
        operators: list[str] = []
        if verbose:
            try:
                operators = operator_names(json.loads(record.pipeline_json))
            except PipelineInvalid:
                operators = []
        run = self.runs.get(record.id)
        status, detail = self.status(record, run)
        stats = self.live_stats(record).public(
            name=record.name,
            processor_id=record.id,
            status=status,
            last_state_change=record.last_state_change,
            scale=scale,
            operators=operators,
            verbose=verbose,
        )
        if detail is not None:
            stats["statusDetail"] = detail
        if run is not None:
            stats["retries"] = run.retries
            stats["lastError"] = run.last_error.public() if run.last_error else None
        else:
            error = record.error
            stats["retries"] = (error.retries or 0) if error else 0
            stats["lastError"] = error_public(error) if error else None
        return stats

    def status(self, record: ProcessorRecord, run: Run | None) -> tuple[str, str | None]:
        """`stats.status` and, while recovering, what the processor is doing."""
        if record.state is not State.STARTED:
            return STATUS[record.state], None
        if run is None:
            if not self._resuming(record.id):
                return "starting", None  # not resumed in this service (yet)
            if self._engine.state != "ready":
                return "recovering", "starting Spark"
            return "recovering", "resuming from checkpoint"
        if run.handle is None:
            wait = max(0.0, (run.retry_at or time.monotonic()) - time.monotonic())
            attempt, attempts = retry_count(run, self._settings.restart_attempts)
            return "recovering", (
                f"restarting after an error in {wait:.1f} s (retry {attempt} of {attempts})"
            )
        if run.recovering is not None:
            return "recovering", run.recovering
        return STATUS[record.state], None


def error_public(error: ProcessorError) -> dict[str, Any]:
    """A stored error as `stats.lastError` shows it."""
    return {
        "code": error.code,
        "message": error.message,
        "time": error.time.isoformat() if error.time else None,
    }


def operator_names(pipeline: Any) -> list[str]:
    """The pipeline's operator names in order, the window's inner stages included."""
    return [stage.operator_name for stage in parse_pipeline(pipeline).walk() if stage.operator_name]
