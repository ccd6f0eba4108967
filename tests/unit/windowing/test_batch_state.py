"""`batch.state`: the batch engine's state as a snapshot and deltas (no Spark)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from pipeline_stages._windowing.batch import state as S
from pipeline_stages._windowing.batch.state import FixedDelta, StateFiles, buffered_lengths
from pipeline_stages._windowing.runtime.clock import Clock
from pipeline_stages._windowing.runtime.fixed import FixedState


def group(order: int, key: str, total: int) -> list[object]:
    """A `$group` entry as the window core keeps it: `[first order, key, states]`."""
    return [order, key, [[total]]]


def names(directory: Path) -> list[str]:
    """The state files' names, the batch id without its leading zeros."""
    return sorted(re.sub(r"^0+(?=\d)", "", p.name) for p in directory.iterdir())


def test_deltas_rebuild_the_state_and_a_replay_starts_from_the_state_before_it(
    tmp_path: Path,
) -> None:
    files = StateFiles(tmp_path)
    state = FixedState(min_open=0, windows={0: {("a",): group(1, "a", 1)}})
    files.save(0, Clock(combined=5), state, base=None, delta=None)
    after_0 = copy.deepcopy(state)

    # Batch 1 folds into key b of window 0 and opens window 10 (empty: its documents were
    # dropped by a `$match` before the `$group`).
    state.windows[0][("b",)] = group(2, "b", 5)
    state.windows[10] = {}
    delta = FixedDelta.of(state, {(0, ("b",))}, {})
    assert delta.groups == {0: {("b",): group(2, "b", 5)}}
    files.save(1, Clock(combined=12), state, base=0, delta=delta)
    after_1 = copy.deepcopy(state)

    # Batch 2 closes window 0, folds into window 10 and into window 20, which it also closes.
    del state.windows[0]
    state.windows[10][("c",)] = group(3, "c", 7)
    state.min_open = 10
    touched = {(10, ("c",)), (20, ("d",))}
    files.save(2, Clock(combined=31), state, base=1, delta=FixedDelta.of(state, touched, {}))

    assert names(tmp_path) == [
        "0.state",
        "1-00000000000000000000.delta",
        "2-00000000000000000001.delta",
    ]
    for before, (want_id, want_clock, want_state) in [
        (1, (0, 5, after_0)),
        (2, (1, 12, after_1)),
        (3, (2, 31, state)),
    ]:
        found = StateFiles(tmp_path).before(before)  # read back as after a restart
        assert found is not None
        assert (found[0], found[1].combined, found[2]) == (want_id, want_clock, want_state)
    assert StateFiles(tmp_path).before(0) is None


def test_buffering_windows_save_the_documents_each_batch_appended(tmp_path: Path) -> None:
    files = StateFiles(tmp_path, empty=list)
    state = FixedState(windows={0: [(1, "0:1:0", '{"a":1}')]})
    files.save(0, Clock(), state, base=None, delta=None)
    lengths = buffered_lengths(state)
    state.windows[0].append((2, "0:2:0", '{"a":2}'))
    state.windows[10] = [(3, "0:3:0", '{"a":3}')]
    delta = FixedDelta.of(state, set(), lengths)
    assert delta.appended == {0: [(2, "0:2:0", '{"a":2}')], 10: [(3, "0:3:0", '{"a":3}')]}
    files.save(1, Clock(), state, base=0, delta=delta)
    found = StateFiles(tmp_path, empty=list).before(2)
    assert found is not None and found[2] == state


def test_a_snapshot_replaces_the_deltas_once_they_outgrow_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(S, "MIN_DELTA_BUDGET", 0)
    files = StateFiles(tmp_path)
    state = FixedState(windows={0: {(f"k{n}",): group(n, f"k{n}", n) for n in range(50)}})
    snapshot_size = files.save(0, Clock(), state, base=None, delta=None)
    kinds = []
    for batch in range(1, 40):
        key = (f"k{batch}",)
        state.windows[0][key] = group(batch, f"k{batch}", batch * 100)
        size = files.save(
            batch, Clock(), state, base=batch - 1, delta=FixedDelta.of(state, {(0, key)}, {})
        )
        kinds.append(
            "delta"
            if any(p.name.startswith(f"{batch:020d}-") for p in tmp_path.iterdir())
            else "snapshot"
        )
        # The state after the batch never takes more than about two snapshots.
        assert size <= 2 * snapshot_size + 200
    assert "delta" in kinds and "snapshot" in kinds[1:], kinds
    # Kept: the latest batch's chain and the chain of the batch before it (a replay of the
    # latest batch starts there); every older file is gone.
    kept = names(tmp_path)
    snapshots = [n for n in kept if n.endswith(".state")]
    assert 1 <= len(snapshots) <= 2, kept
    found = StateFiles(tmp_path).before(40)
    assert found is not None and found[2] == state


def test_a_replayed_batch_replaces_the_file_its_first_attempt_wrote(tmp_path: Path) -> None:
    files = StateFiles(tmp_path)
    state = FixedState(windows={0: {("a",): group(1, "a", 1)}})
    files.save(0, Clock(), state, base=None, delta=None)
    state.windows[0][("a",)] = group(1, "a", 2)
    files.save(1, Clock(), state, base=0, delta=FixedDelta.of(state, {(0, ("a",))}, {}))
    replayed = FixedState(windows={0: {("a",): group(1, "a", 3)}})
    files.save(1, Clock(), replayed, base=0, delta=None)  # the replay writes a snapshot
    assert names(tmp_path) == ["0.state", "1.state"]
    found = StateFiles(tmp_path).before(2)
    assert found is not None and found[2] == replayed


def test_a_delta_whose_base_is_missing_is_an_error_naming_the_directory(tmp_path: Path) -> None:
    files = StateFiles(tmp_path)
    state = FixedState(windows={0: {}})
    files.save(0, Clock(), state, base=None, delta=None)
    files.save(1, Clock(), state, base=0, delta=FixedDelta.of(state, set(), {}))
    (tmp_path / f"{0:020d}.state").unlink()
    with pytest.raises(RuntimeError, match=r"delta of batch 1 applies to batch 0, whose state"):
        StateFiles(tmp_path).before(2)
