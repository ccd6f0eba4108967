"""`DefinitionChecker`: a processor definition checked as create, modify and start need it.

First everything that needs no Spark (`validate.check_definition`: shapes, specs, options,
connections), then, unless told not to, the engine's compile (`Engine.check`), whose
expression-level problems and warnings join the definition's. A compiler bug becomes a
`compile_error` problem, never a 500.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from pipeline_stages._base import PipelineInvalid, Problem
from service.config.settings import Settings
from service.errors import PipelineRejected, SluiceError
from service.manager.build import dlq_option
from service.manager.connections import ConnectionRegistry
from service.manager.runs import summarize_error
from service.manager.validate import Definition, check_definition, rejected_by_compiler
from service.runtime.engine import CompileRequest, Engine
from service.stores import ProcessorRecord

log = logging.getLogger("sluice.service")


class DefinitionChecker:
    """Checks definitions against the registered connections and the engine's compiler."""

    def __init__(
        self, *, settings: Settings, engine: Engine, connections: ConnectionRegistry
    ) -> None:
        self._settings = settings
        self._engine = engine
        self._connections = connections

    def validate(
        self, pipeline: list[Any], dlq: Mapping[str, str] | None
    ) -> tuple[list[Problem], list[Problem], bool]:
        """`(problems, warnings, compiled)`: the checks of `create`, without storing anything.

        The Spark compiler runs only when the engine is ready, so that validating never waits
        for Spark to start; every operator and structural problem is found without it.
        """
        compile_ = self._engine.state == "ready"
        try:
            definition = self.check("validate", pipeline, dlq, compile_=compile_)
        except PipelineRejected as error:
            return list(error.problems), list(error.warnings), compile_
        return [], definition.warnings, compile_

    def check(
        self,
        name: str,
        pipeline: list[Any],
        dlq: Mapping[str, str] | None,
        *,
        compile_: bool = True,
    ) -> Definition:
        """The checked definition of processor `name`.

        Raises:
            PipelineRejected: every problem found, with its JSON path.
        """
        definition = check_definition(
            pipeline,
            dlq,
            type_of=self._connections.type_of,
            default_dlq=self._settings.default_dlq is not None,
        )
        if not compile_:
            return definition
        request = CompileRequest(name, pipeline, definition.has_dlq, self._connections.for_engine())
        try:
            compiled_warnings = self._engine.check(request)
        except PipelineInvalid as error:
            raise rejected_by_compiler(error) from None
        except SluiceError:
            raise
        except Exception as error:  # noqa: BLE001 - a compiler bug must not become a 500
            log.exception("compiling processor %s failed", name)
            problem = Problem("compile_error", "/pipeline", summarize_error(error))
            raise PipelineRejected(
                "the pipeline could not be compiled", problems=[problem]
            ) from None
        seen = {(w.code, w.path) for w in definition.warnings}
        extra = [w for w in compiled_warnings if (w.code, w.path) not in seen]
        definition.warnings.extend(extra)
        return definition

    def of_record(self, record: ProcessorRecord) -> Definition:
        """A stored processor's definition, checked without the compiler (it compiled when
        it was stored; the run compiles it again)."""
        return check_definition(
            json.loads(record.pipeline_json),
            dlq_option(record.options),
            type_of=self._connections.type_of,
            default_dlq=self._settings.default_dlq is not None,
        )
