"""The conformance transcripts through the `spark` executor (`transcript_cases.py`)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conformance.harness import Executor, Transcript, run_transcript
from tests.conformance.transcript_cases import SPARK, cases


@pytest.mark.parametrize(("make_executor", "transcript"), cases(SPARK))
def test_transcript(make_executor: Callable[[], Executor], transcript: Transcript) -> None:
    run_transcript(make_executor(), transcript)
