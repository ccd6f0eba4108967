"""The README's pipeline examples are valid pipelines (they cannot drift from the code)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipeline_stages import parse_pipeline

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"```json\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("block", BLOCKS, ids=[f"example-{i}" for i in range(len(BLOCKS))])
def test_readme_example_is_a_valid_pipeline(block: str) -> None:
    pipeline = json.loads(block)
    parsed = parse_pipeline(pipeline)
    assert parsed.stages[0].key == "$source"


@pytest.mark.spark
@pytest.mark.parametrize("block", BLOCKS, ids=[f"example-{i}" for i in range(len(BLOCKS))])
def test_readme_example_compiles_to_a_spark_plan(spark: object, block: str) -> None:
    """Compiling catches what parsing cannot: unknown expression operators, connections."""
    from pipeline_stages._base import ProblemCollector
    from pipeline_stages._connectors.sources.register import register_all
    from pipeline_stages._engine.plan import compile_pipeline
    from pipeline_stages._stream.context import CompileContext, ConnectionInfo

    register_all(spark)
    # The connections the README's examples name, as `sluice connections create` makes them.
    connections = {
        "atlas": ConnectionInfo("atlas", "Cluster", {"uri": "mongodb://localhost:27017"}),
        "files": ConnectionInfo("files", "File", {"directory": "/tmp/sluice-readme-files"}),
    }
    ctx = CompileContext(
        spark=spark,  # type: ignore[arg-type]
        processor_name="readme",
        problems=ProblemCollector(),
        connections=connections,
    )
    compiled = compile_pipeline(parse_pipeline(json.loads(block)), ctx)
    assert compiled.envelopes.isStreaming
