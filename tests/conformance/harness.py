"""Conformance transcripts: loading, the executor interface, and strict partial matching.

A transcript (style guide G.21) is plain JSON:

```json
{"name": "...", "pipeline": [{"$source": {...}}, {"$tumblingWindow": {...}}],
 "partitions": 1,                      // optional, source partitions
 "xfail": "why this must fail",        // optional: a must-fail transcript (harness check)
 "notimpl": {"spark": "why"},          // optional: expected gap of one executor
 "steps": [{"input": [...], "partition": 0},
           {"idle": "1 minute"},
           {"expect": {"emitted": [...], "dlq": [...], "ordered": false}}]}
```

Matching is partial on the fields listed (recursively into objects, `{"$exists": false}`
asserting absence) and strict everywhere else: every output must be matched by exactly one
expected document, extra output fails, and nothing may be output after the last `expect`.
Scalars compare by MQL value *and* numeric family (an int never matches a double). Dates and
other Extended JSON values are decoded on both sides before comparing.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pipeline_stages._base import UNIT_MS
from pipeline_stages._documents.ejson import from_ejson
from pipeline_stages._documents.values import mql_type, to_ejson, values_equal

TRANSCRIPTS = Path(__file__).parent / "transcripts"


class Executor(Protocol):
    """Something that runs a pipeline over fed documents; the reference model and (later) the
    Spark window operator implement it."""

    name: str

    def start(self, pipeline: list[dict[str, Any]], *, partitions: int = 1) -> None:
        """Prepare to run `pipeline`; processing time starts at 0."""

    def feed(self, docs: list[dict[str, Any]], partition: int = 0) -> None:
        """Deliver one arrival batch (relaxed EJSON documents) on `partition`."""

    def idle(self, ms: int) -> None:
        """Let `ms` of processing time pass with no input on any partition."""

    def drain(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Return `(emitted, dlq)` produced since the previous drain, as relaxed EJSON."""


class TranscriptMismatch(AssertionError):
    """An executor's output disagreed with a transcript."""


@dataclass(frozen=True)
class Transcript:
    """One parsed transcript file."""

    name: str
    pipeline: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    partitions: int = 1
    xfail: str | None = None
    notimpl: Mapping[str, str] = field(default_factory=dict)
    path: Path | None = None


def load_transcripts(directory: Path = TRANSCRIPTS) -> list[Transcript]:
    """Every `*.json` transcript in `directory`, sorted by file name."""
    transcripts = []
    for path in sorted(directory.glob("*.json")):
        data = json.loads(path.read_text())
        transcripts.append(
            Transcript(
                name=data["name"],
                pipeline=data["pipeline"],
                steps=data["steps"],
                partitions=data.get("partitions", 1),
                xfail=data.get("xfail"),
                notimpl=data.get("notimpl", {}),
                path=path,
            )
        )
    return transcripts


_DURATION = re.compile(r"^\s*(\d+)\s*([a-z]+)\s*$")
_UNIT_ALIASES = {
    "ms": "ms",
    "s": "second",
    "sec": "second",
    "second": "second",
    "seconds": "second",
    "m": "minute",
    "min": "minute",
    "minute": "minute",
    "minutes": "minute",
    "h": "hour",
    "hour": "hour",
    "hours": "hour",
    "d": "day",
    "day": "day",
    "days": "day",
}


def parse_duration(value: Any) -> int:
    """`"90s"`, `"1 minute"`, `{"size": 1, "unit": "minute"}` or an int (ms) -> milliseconds."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, dict):
        return int(value["size"]) * UNIT_MS[value["unit"]]
    found = _DURATION.match(str(value))
    if not found or found.group(2) not in _UNIT_ALIASES:
        raise ValueError(f"not a duration: {value!r}")
    return int(found.group(1)) * UNIT_MS[_UNIT_ALIASES[found.group(2)]]


# --------------------------------------------------------------------------- matching


def _family(value: Any) -> str:
    kind = mql_type(value)
    return "integer" if kind in ("int", "long") else kind


def mismatches(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Why `actual` does not match `expected` (empty when it does); both decoded MQL values."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path or '.'}: expected an object, got {to_ejson(actual)!r}"]
        problems = []
        for key, want in expected.items():
            where = f"{path}.{key}" if path else key
            if want == {"$exists": False}:
                if key in actual:
                    problems.append(f"{where}: expected absent, got {to_ejson(actual[key])!r}")
            elif key not in actual:
                problems.append(f"{where}: missing")
            else:
                problems.extend(mismatches(want, actual[key], where))
        return problems
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: expected {to_ejson(expected)!r}, got {to_ejson(actual)!r}"]
        return [
            p
            for i, (w, a) in enumerate(zip(expected, actual, strict=True))
            for p in mismatches(w, a, f"{path}[{i}]")
        ]
    same_nan = (
        isinstance(expected, float)
        and isinstance(actual, float)
        and math.isnan(expected)
        and math.isnan(actual)
    )
    if same_nan or (_family(expected) == _family(actual) and values_equal(expected, actual)):
        return []
    return [f"{path}: expected {to_ejson(expected)!r}, got {to_ejson(actual)!r}"]


def match_outputs(expected: list[Any], actual: list[Any], *, ordered: bool) -> list[str]:
    """Pair every actual output with exactly one expected document (any order unless `ordered`)."""
    if ordered:
        if len(expected) != len(actual):
            return [f"expected {len(expected)} documents, got {len(actual)}: {_show(actual)}"]
        return [
            p
            for i, (w, a) in enumerate(zip(expected, actual, strict=True))
            for p in mismatches(w, a, f"[{i}]")
        ]
    fits = [[not mismatches(w, a) for a in actual] for w in expected]
    assignment = _assign(fits, 0, set())
    if len(expected) == len(actual) and assignment is not None:
        return []
    unmatched = [to_ejson(w) for i, w in enumerate(expected) if not any(fits[i])]
    return [
        f"expected {len(expected)} documents, got {len(actual)}; unmatched expected: {unmatched}; actual: {_show(actual)}"
    ]


def _assign(fits: list[list[bool]], row: int, used: set[int]) -> list[int] | None:
    if row == len(fits):
        return []
    for col, ok in enumerate(fits[row]):
        if ok and col not in used:
            rest = _assign(fits, row + 1, used | {col})
            if rest is not None:
                return [col, *rest]
    return None


def _show(docs: list[Any]) -> str:
    return json.dumps([to_ejson(d) for d in docs], default=str)[:2000]


# --------------------------------------------------------------------------- running


def run_transcript(executor: Executor, transcript: Transcript) -> None:
    """Drive `executor` through the transcript's steps, checking every `expect`.

    Raises:
        TranscriptMismatch: at the first step whose output does not match.
    """
    executor.start(transcript.pipeline, partitions=transcript.partitions)
    for number, step in enumerate(transcript.steps):
        if "input" in step:
            executor.feed(step["input"], step.get("partition", 0))
        elif "idle" in step:
            executor.idle(parse_duration(step["idle"]))
        elif "expect" in step:
            _check(executor, step["expect"], f"step {number}")
        elif set(step) != {"comment"}:
            raise ValueError(f"{transcript.name}: unknown step {step!r}")
    _check(executor, {}, "end of transcript (no output may follow the last expect)")


def _check(executor: Executor, expect: Mapping[str, Any], where: str) -> None:
    emitted, dlq = executor.drain()
    ordered = bool(expect.get("ordered", False))
    problems = []
    for kind, actual in (("emitted", emitted), ("dlq", dlq)):
        wanted = from_ejson(expect.get(kind, []))
        problems += [
            f"{kind} {p}" for p in match_outputs(wanted, from_ejson(actual), ordered=ordered)
        ]
    if problems:
        raise TranscriptMismatch(f"{where}: " + "\n".join(problems))
