"""Runs every conformance transcript through the pure-Python reference model; the Spark
executors run them in `test_transcripts_spark*.py` (`transcript_cases.py` says why apart)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conformance.harness import Executor, Transcript, load_transcripts, run_transcript
from tests.conformance.transcript_cases import EXECUTORS, cases


@pytest.mark.parametrize(("make_executor", "transcript"), cases(EXECUTORS[0]))
def test_transcript(make_executor: Callable[[], Executor], transcript: Transcript) -> None:
    run_transcript(make_executor(), transcript)


def test_transcript_names_are_unique_and_match_files() -> None:
    transcripts = load_transcripts()
    names = [t.name for t in transcripts]
    assert len(names) == len(set(names))
    assert all(t.path is not None and t.path.stem == t.name for t in transcripts)


def test_some_transcripts_must_fail() -> None:
    assert any(t.xfail for t in load_transcripts())
