"""Helpers for stage-spec tests: parse one stage body, list its problems (no Spark)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pipeline_stages import PipelineInvalid, parse_stage
from pipeline_stages._base import StageModel

Problems = list[tuple[str, str]]


def _relative(path: str, key: str) -> str:
    prefix = f"/pipeline/0/{key.replace('~', '~0').replace('/', '~1')}"
    return path[len(prefix) :] if path.startswith(prefix) else path


@pytest.fixture
def parse_body() -> Callable[[str, Any], StageModel]:
    """Parse `{key: body}` as stage 0 and return its spec."""

    def run(key: str, body: Any) -> StageModel:
        return parse_stage({key: body}).spec

    return run


@pytest.fixture
def body_problems() -> Callable[[str, Any], Problems]:
    """`(code, path)` of every problem of `{key: body}`; paths relative to the stage body."""

    def run(key: str, body: Any) -> Problems:
        with pytest.raises(PipelineInvalid) as info:
            parse_stage({key: body})
        return [(p.code, _relative(p.path, key)) for p in info.value.problems]

    return run


@pytest.fixture
def body_messages() -> Callable[[str, Any], list[str]]:
    """The messages of every problem of `{key: body}`."""

    def run(key: str, body: Any) -> list[str]:
        with pytest.raises(PipelineInvalid) as info:
            parse_stage({key: body})
        return [p.message for p in info.value.problems]

    return run
