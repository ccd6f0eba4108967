"""`ProcessorManager`: processor definitions, the lifecycle state machine, and their runs.

Definitions and states live in the metadata store; running queries live in `RunTable`
(`manager.runs`). Every operation on a processor holds that processor's lock, re-reads the
record (`manager.records`), asks the transitions table (`manager.states`) whether the move is legal, and saves
the result with the store's compare-and-set. On service start, processors that were
`STARTED` are restarted from their checkpoints; on shutdown their queries stop cleanly and
they stay `STARTED` in the store, so the next start resumes them. Until a resumed processor's
query has caught up, its stats say `recovering`, with what it is doing (`statusDetail`:
"starting Spark", "resuming from checkpoint", "replaying from checkpoint"), and its counters
are the persisted ones, never zeros.

Checkpoints live in `<checkpoint root>/<processor id>/g<generation>/`: ids, not names, so a
name can never steer a path, and a rename keeps the checkpoint. `resumeFromCheckpoint:
false` moves to a new generation (a fresh checkpoint; the old one is deleted).
"""

from __future__ import annotations

import builtins
import json
import logging
import shutil
import threading
from collections.abc import Mapping
from typing import Any

from pipeline_stages._base import Problem
from service.config.settings import Settings
from service.errors import (
    EngineUnavailable,
    ProcessorExists,
    ProcessorNotFound,
    ResourceConflict,
    SluiceError,
)
from service.manager.build import RunFactory, dlq_option
from service.manager.checker import DefinitionChecker
from service.manager.connections import ConnectionRegistry, referenced_connections
from service.manager.dlq import DlqTargets
from service.manager.records import ProcessorRecords, failed
from service.manager.runs import REPLAYING, RunTable
from service.manager.states import Action, State, next_state
from service.manager.stats import LiveStats, utc_now
from service.manager.validate import (
    check_resumable_modify,
)
from service.manager.view import ProcessorView
from service.manager.writers import SampleBuffer
from service.runtime.engine import Engine
from service.runtime.window_pins import checkpoint_timers
from service.schemas.processors import NoDlq, ProcessorCreate, ProcessorModify
from service.stores import (
    AlreadyExists,
    ProcessorRecord,
    Stores,
)

log = logging.getLogger("sluice.service")


class ProcessorManager:
    """See the module docstring."""

    def __init__(
        self,
        *,
        settings: Settings,
        stores: Stores,
        engine: Engine,
        connections: ConnectionRegistry,
    ) -> None:
        self._settings = settings
        self._stores = stores
        self.engine = engine
        self.connections = connections
        self.dlq_targets = DlqTargets(stores, connections, settings)
        self.checker = DefinitionChecker(settings=settings, engine=engine, connections=connections)
        self._factory = RunFactory(
            settings,
            connections=connections,
            dlq_targets=self.dlq_targets,
            documents=stores.documents,
            stats=stores.stats,
            input_from_progress=not engine.batch_input_metrics,
        )
        self._records = ProcessorRecords(stores)
        self._guard = threading.Lock()
        #: Processors STARTED when the service started and not resumed yet.
        self._resuming: set[str] = set()
        self.runs = RunTable(
            engine,
            settings,
            lock_for=self._records.lock_for,
            mark_failed=self._records.mark_failed,
            persist_stats=self._records.persist_stats,
            report_error=self._records.report_error,
        )
        engine.set_progress_callback(self.runs.on_progress)
        self.view = ProcessorView(
            runs=self.runs,
            stats_ledgers=stores.stats,
            engine=engine,
            settings=settings,
            resuming=self._is_resuming,
        )

    # ------------------------------------------------------------------ service lifecycle

    def open(self) -> None:
        """Start the engine (eagerly or when processors must resume) and the supervisor."""
        started = self._records.started()
        with self._guard:
            self._resuming.update(record.id for record in started)
        if self._settings.spark_eager or started:
            self.engine.start()
        self.runs.start_supervisor()
        if started:
            threading.Thread(target=self.recover, name="sluice-recover", daemon=True).start()

    def recover(self) -> None:
        """Restart, from their checkpoints, the processors that were STARTED."""
        for record in self._records.started():
            with self._guard:
                self._resuming.add(record.id)
            try:
                self._resume(record)
            finally:
                with self._guard:
                    self._resuming.discard(record.id)

    def _resume(self, record: ProcessorRecord) -> None:
        with self._records.lock_for(record.id):
            fresh = self._stores.processors.get_by_id(record.id)
            if fresh is None or fresh.state is not State.STARTED or self.runs.get(fresh.id):
                return
            try:
                run = self._factory.new_run(fresh, self.checker.of_record(fresh))
                run.recovering = REPLAYING
                self.runs.launch(run)
                log.info("resumed processor %s from its checkpoint", fresh.name)
            except (EngineUnavailable, ResourceConflict) as error:
                # Spark is down, or another service runs this checkpoint: not the
                # processor's fault; it stays STARTED and resumes on a later start.
                log.error("cannot resume processor %s: %s", fresh.name, error.detail)
            except SluiceError as error:
                self._records.save(failed(fresh, "resume_failed", error.detail, fresh.stats))

    def close(self) -> None:
        """Stop every query cleanly (processors stay STARTED) and the engine."""
        self.runs.stop_supervisor()
        for run in self.runs.halt_all():
            self._records.persist_stats(run, wait=True)
        self.dlq_targets.close()
        self._factory.sink_clients.close()
        self.engine.shutdown()

    # ------------------------------------------------------------------ definitions

    def create(self, body: ProcessorCreate) -> tuple[ProcessorRecord, list[Problem]]:
        """Validate (every problem at once), compile, and store a CREATED processor."""
        if self._stores.processors.get(body.name) is not None:
            raise ProcessorExists(body.name)
        dlq = body.options.dlq.model_dump() if body.options.dlq else None
        definition = self.checker.check(body.name, body.pipeline, dlq)
        record = ProcessorRecord.new(
            name=body.name,
            pipeline_json=json.dumps(body.pipeline),
            options={"dlq": dlq} if dlq else {},
            now=utc_now(),
        )
        try:
            return self._stores.processors.create(record), definition.warnings
        except AlreadyExists:
            raise ProcessorExists(body.name) from None

    # Below this method the class body's `list` is the method: annotations say `builtins.list`.
    def list(self, *, offset: int, limit: int) -> tuple[list[ProcessorRecord], int]:
        """A page of processors by creation time."""
        return self._stores.processors.list(offset=offset, limit=limit)

    def get(self, name: str) -> ProcessorRecord:
        """The named processor; `ProcessorNotFound` otherwise."""
        return self._records.get(name)

    def modify(
        self, name: str, body: ProcessorModify
    ) -> tuple[ProcessorRecord, builtins.list[Problem]]:
        """Change name, pipeline or DLQ of a processor that is not started (§7.4)."""
        with self._records.locked(name) as record:
            next_state(record.name, record.state, Action.MODIFY)
            old_pipeline = json.loads(record.pipeline_json)
            pipeline = body.pipeline if body.pipeline is not None else old_pipeline
            dlq = dlq_option(record.options)
            if isinstance(body.options.dlq, NoDlq):
                dlq = None
            elif body.options.dlq is not None:
                dlq = body.options.dlq.model_dump()
            new_name = body.name or record.name
            if new_name != record.name and self._stores.processors.get(new_name) is not None:
                raise ProcessorExists(new_name)
            definition = self.checker.check(new_name, pipeline, dlq)
            resume = body.options.resumeFromCheckpoint
            checkpoint = self._factory.checkpoint(record)
            if resume and body.pipeline is not None and checkpoint.exists():
                check_resumable_modify(
                    old_pipeline, definition, timers=checkpoint_timers(checkpoint)
                )
            updated = self._records.save(
                record.evolve(
                    name=new_name,
                    pipeline_json=json.dumps(pipeline),
                    options={"dlq": dlq} if dlq else {},
                    generation=record.generation + (0 if resume else 1),
                )
            )
            if not resume:
                shutil.rmtree(self._factory.checkpoint(record), ignore_errors=True)
            return updated, definition.warnings

    def drop(self, name: str) -> None:
        """Stop (if started) and delete a processor, its checkpoints and its sample buffer."""
        with self._records.locked(name) as record:
            next_state(record.name, record.state, Action.DROP)
            self.runs.halt(record.id)
            if not self._stores.processors.delete(record.name):
                raise ProcessorNotFound(name)
            self._stores.stats.delete(record.id)
            shutil.rmtree(self._factory.processor_dir(record), ignore_errors=True)
            self._factory.forget(record)
        self._records.forget_lock(record.id)

    # ------------------------------------------------------------------ lifecycle

    def start(self, name: str, *, resume: bool = True) -> ProcessorRecord:
        """Start a processor's query (from its checkpoint unless `resume` is false)."""
        with self._records.locked(name) as record:
            next_state(record.name, record.state, Action.START)
            if not resume:
                shutil.rmtree(self._factory.checkpoint(record), ignore_errors=True)
                record = self._records.save(record.evolve(generation=record.generation + 1))
            definition = self.checker.of_record(record)
            run = self._factory.new_run(record, definition)
            before = record
            record = self._records.save(
                record.evolve(state=State.STARTED, error=None, last_state_change=utc_now())
            )
            try:
                self.runs.launch(run)
            except SluiceError:
                fresh = self._records.reload(record)
                self._records.save(
                    fresh.evolve(
                        state=before.state,
                        error=before.error,
                        last_state_change=before.last_state_change,
                    )
                )
                raise
            return self._records.reload(record)

    def stop(self, name: str) -> ProcessorRecord:
        """Stop a started processor's query (its checkpoint is kept)."""
        with self._records.locked(name) as record:
            next_state(record.name, record.state, Action.STOP)
            run = self.runs.halt(record.id)
            stats = run.stats.to_record() if run is not None else record.stats
            return self._records.save(
                record.evolve(
                    state=State.STOPPED, error=None, stats=stats, last_state_change=utc_now()
                )
            )

    # ------------------------------------------------------------------ observation

    def live_stats(self, record: ProcessorRecord) -> LiveStats:
        """The processor's stats: live while it runs here, else as persisted."""
        return self.view.live_stats(record)

    def stats(
        self, record: ProcessorRecord, *, verbose: bool = False, scale: int = 1
    ) -> dict[str, Any]:
        """Atlas's stats object for a processor (`ProcessorView.stats`)."""
        return self.view.stats(record, verbose=verbose, scale=scale)

    def sample(
        self, name: str, *, limit: int, after: str | None
    ) -> tuple[builtins.list[dict[str, Any]], str | None]:
        """The most recent output and DLQ messages (see `SampleBuffer.recent`)."""
        return self.sample_buffer(name).recent(limit, after=after)

    def sample_buffer(self, name: str) -> SampleBuffer:
        """The processor's sample buffer (the writer of its run appends to the same one)."""
        return self._factory.sample(self.get(name))

    def users_of(self, connection: str) -> builtins.list[str]:
        """Processors whose pipeline or DLQ names the connection."""
        users = []
        for record in self._records.all():
            document = {"pipeline": json.loads(record.pipeline_json), "options": record.options}
            if connection in referenced_connections(document):
                users.append(record.name)
        return users

    def all_records(self) -> builtins.list[ProcessorRecord]:
        """Every processor (for metrics)."""
        return list(self._records.all())

    def validate(
        self, pipeline: builtins.list[Any], dlq: Mapping[str, str] | None
    ) -> tuple[builtins.list[Problem], builtins.list[Problem], bool]:
        """`(problems, warnings, compiled)`: the checks of `create`, without storing anything
        (`DefinitionChecker.validate`)."""
        return self.checker.validate(pipeline, dlq)

    # ------------------------------------------------------------------ internals

    def _is_resuming(self, processor_id: str) -> bool:
        with self._guard:
            return processor_id in self._resuming
