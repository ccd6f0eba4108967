"""`service.runtime.window_pins`: a checkpoint keeps the window engine and the operator's bucket
count it started with."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.runtime.window_pins import (
    BUCKETS_FILE,
    PIN_FILE,
    TIMERS_FILE,
    WINDOW_STATE_DIR,
    EnginePinError,
    checkpoint_buckets,
    checkpoint_engine,
    checkpoint_timers,
    record_timers,
)


def test_a_fresh_checkpoint_takes_the_configured_engine_and_records_it(tmp_path: Path) -> None:
    checkpoint = tmp_path / "g000001"
    assert checkpoint_engine(checkpoint, "batch") == "batch"
    assert (checkpoint / PIN_FILE).read_text() == "batch\n"
    # The conf changed since: the checkpoint stays on the engine that wrote its state.
    assert checkpoint_engine(checkpoint, "operator") == "batch"
    assert not list(checkpoint.glob(".*.tmp"))


def test_a_recorded_operator_checkpoint_stays_on_the_operator(tmp_path: Path) -> None:
    assert checkpoint_engine(tmp_path, "operator") == "operator"
    assert checkpoint_engine(tmp_path, "batch") == "operator"


def test_an_unrecorded_checkpoint_with_batch_engine_state_is_the_batch_engines(
    tmp_path: Path,
) -> None:
    (tmp_path / WINDOW_STATE_DIR).mkdir()
    (tmp_path / WINDOW_STATE_DIR / "00000000000000000003.state").write_bytes(b"x")
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "3").write_text("v1")
    assert checkpoint_engine(tmp_path, "operator") == "batch"
    assert (tmp_path / PIN_FILE).read_text() == "batch\n"


def test_an_unrecorded_checkpoint_with_only_spark_offsets_is_the_operators(
    tmp_path: Path,
) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text("v1")
    (tmp_path / WINDOW_STATE_DIR).mkdir()  # created, but no batch ever saved state in it
    assert checkpoint_engine(tmp_path, "batch") == "operator"


def test_an_unknown_configured_engine_is_left_to_the_compiler_and_not_recorded(
    tmp_path: Path,
) -> None:
    assert checkpoint_engine(tmp_path, "turbo") == "turbo"
    assert not (tmp_path / PIN_FILE).exists()


def test_a_corrupt_record_is_an_error_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / PIN_FILE).write_text("turbo\n")
    with pytest.raises(
        EnginePinError, match=r"sluice-window-engine records the window engine 'turbo'"
    ):
        checkpoint_engine(tmp_path, "batch")


def test_a_checkpoint_keeps_the_bucket_count_it_started_with(tmp_path: Path) -> None:
    checkpoint = tmp_path / "g000001"
    assert checkpoint_buckets(checkpoint, 2) == 2
    assert (checkpoint / BUCKETS_FILE).read_text() == "2\n"
    # The conf asks for 4 since: the groups' partials live in buckets hash(key) mod 2.
    assert checkpoint_buckets(checkpoint, 4) == 2
    assert checkpoint_buckets(tmp_path / "g000002", 4) == 4  # a fresh start takes the conf's
    assert not list(checkpoint.glob(".*.tmp"))


def test_a_corrupt_bucket_record_is_an_error_naming_the_file(tmp_path: Path) -> None:
    for recorded in ("0", "two", ""):
        (tmp_path / BUCKETS_FILE).write_text(recorded + "\n")
        with pytest.raises(
            EnginePinError, match=r"sluice-window-buckets records the window bucket count"
        ):
            checkpoint_buckets(tmp_path, 1)


def test_a_new_checkpoint_leaves_its_timers_to_the_pipeline_and_keeps_what_it_recorded(
    tmp_path: Path,
) -> None:
    checkpoint = tmp_path / "g000001"
    assert checkpoint_timers(checkpoint) is None
    record_timers(checkpoint, False)
    assert (checkpoint / TIMERS_FILE).read_text() == "none\n"
    checkpoint_engine(checkpoint, "operator")  # the engine's record does not change it
    assert checkpoint_timers(checkpoint) is False
    record_timers(tmp_path / "g000002", True)
    assert checkpoint_timers(tmp_path / "g000002") is True
    assert not list(checkpoint.glob(".*.tmp"))


@pytest.mark.parametrize("made", [PIN_FILE, BUCKETS_FILE, "offsets/0"])
def test_a_checkpoint_started_before_timers_were_recorded_has_them(
    tmp_path: Path, made: str
) -> None:
    """Every window query had processing-time timeouts then: its state has their column."""
    (tmp_path / made).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / made).write_text("operator\n" if made == PIN_FILE else "1\n")
    assert checkpoint_timers(tmp_path) is True


def test_a_corrupt_timers_record_is_an_error_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / TIMERS_FILE).write_text("sometimes\n")
    with pytest.raises(EnginePinError, match=r"sluice-window-timers records the window timers"):
        checkpoint_timers(tmp_path)
