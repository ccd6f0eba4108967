"""The File sink's naming and atomic files, and the File source's offsets (no Spark)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from pipeline_stages._connectors.file_paths import PathEscapes, path_problem, resolve_under
from pipeline_stages._connectors.sinks.file_writer import FileEmitWriter, batch_file_name
from pipeline_stages._connectors.sinks.plans import FileEmitPlan, Name
from pipeline_stages._connectors.sources.arrow_records import raw_rows
from pipeline_stages._connectors.sources.files import (
    FilePosition,
    FileStreamReader,
    advance,
    complete_lines,
    line_ranges,
    listed,
)
from pipeline_stages._stream.batch import BatchResult, Output

# ----------------------------------------------------------------------------- paths


@pytest.mark.parametrize("path", ["", "/abs", "..", "../x", "a/../../x", "a\x00b"])
def test_unusable_relative_paths(path: str) -> None:
    assert path_problem(path) is not None


def test_resolve_under_refuses_symbolic_links_out_of_the_root(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "link").symlink_to(outside)
    assert resolve_under(str(root), "a/b") == str(root / "a" / "b")
    with pytest.raises(PathEscapes, match="resolves outside"):
        resolve_under(str(root), "link/x")


# ----------------------------------------------------------------------------- sink


def test_batch_file_names_are_safe_and_sort_in_batch_order() -> None:
    names = [batch_file_name("my proc/1", "g000002", b) for b in (0, 9, 10, 123)]
    assert names[0] == "my_proc_1-g000002-000000000000.jsonl"
    assert names == sorted(names)
    assert batch_file_name(".hidden", "t", 1).startswith("hidden-")


def batch(batch_id: int, *outputs: Output) -> BatchResult:
    result = BatchResult(batch_id=batch_id)
    result.outputs = list(outputs)
    result.order = [("out", i) for i in range(len(outputs))]
    return result


def test_file_writer_writes_one_file_per_batch_and_a_replay_overwrites(tmp_path: Path) -> None:
    writer = FileEmitWriter(
        FileEmitPlan("files", Name("out", pointer=("path",))),
        root=str(tmp_path),
        processor="p",
        run_tag="r1",
    )
    one = batch(4, Output('{"a":1}', "k1"), Output('{"a":2}', "k2"))
    assert writer.write(one) == []
    assert writer.write(one) == []  # the replay of batch 4
    writer.write(batch(5, Output('{"a":3}', "k3")))
    writer.write(batch(6))  # no outputs, no file
    files = sorted(os.listdir(tmp_path / "out"))
    assert files == ["p-r1-000000000004.jsonl", "p-r1-000000000005.jsonl"]
    assert (tmp_path / "out" / files[0]).read_text() == '{"a":1}\n{"a":2}\n'


def test_file_writer_sends_bad_computed_paths_to_the_dlq(tmp_path: Path) -> None:
    writer = FileEmitWriter(
        FileEmitPlan("files", Name(None, "$dir", ("path",))),
        root=str(tmp_path),
        processor="p",
        run_tag="r",
    )
    dlq = writer.write(
        batch(
            0,
            Output('{"a":1}', "k1", {"path": "ok"}),
            Output('{"a":2}', "k2", {"path": "../escape"}),
            Output('{"a":3}', "k3", {"path": 5}),
        )
    )
    assert os.listdir(tmp_path / "ok") == ["p-r-000000000000.jsonl"]
    assert [(r["doc"], r["operatorName"]) for r in dlq] == [
        ({"a": 2}, "EmitOperator"),
        ({"a": 3}, "EmitOperator"),
    ]
    assert "leaves the File connection's directory" in dlq[0]["errInfo"]["reason"]
    assert not (tmp_path.parent / "escape").exists()


# ----------------------------------------------------------------------------- source


def test_complete_lines_wait_for_a_newline_unless_final() -> None:
    assert complete_lines(b"a\nb\nc", final=False) == 2
    assert complete_lines(b"a\nb\nc", final=True) == 3
    assert complete_lines(b"a\n", final=True) == 1
    assert complete_lines(b"", final=True) == 0


def test_advance_moves_through_files_by_the_limit() -> None:
    files = [("a", 2), ("b", 0), ("c", 3)]
    start = FilePosition()
    first = advance(start, files, 3, now_ms=10)
    assert first == FilePosition("c", 1, 3, 10)
    second = advance(first, files, 3, now_ms=20)
    assert second == FilePosition("c", 3, 5, 20)
    assert advance(second, files, 3, now_ms=30) == second  # nothing new: same offset
    assert advance(start, files, None, now_ms=5) == FilePosition("c", 3, 5, 5)


def test_line_ranges_between_offsets() -> None:
    start, end = FilePosition("a", 1, 1), FilePosition("c", 2, 6)
    assert line_ranges(start, end, ["a", "b", "c", "d"]) == [
        ("a", 1, -1),
        ("b", 0, -1),
        ("c", 0, 2),
    ]


def write(path: Path, *lines: Any, newline: bool = True) -> None:
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    path.write_text(text + ("\n" if newline else ""), encoding="utf-8")


def test_reader_reads_new_files_in_name_order_and_replays_the_same_rows(tmp_path: Path) -> None:
    write(tmp_path / "001.jsonl", {"n": 1}, "", {"n": 2})
    write(tmp_path / ".002.jsonl.tmp", {"n": 99})  # a writer's temporary file: never read
    reader = FileStreamReader({"directory": str(tmp_path), "relative": "in"})
    limit = ReadMaxRows(2)
    start = reader.initialOffset()
    end = reader.latestOffset(start, limit)
    (part,) = reader.partitions(start, end)
    rows = raw_rows(reader.read(part))
    assert [(r[1], json.loads(r[2])) for r in rows] == [(1, {"n": 1})]  # the blank line: seq 2
    assert json.loads(rows[0][4]) == {"type": "file", "path": "in/001.jsonl", "line": 1}
    write(tmp_path / "000.jsonl", {"n": 0})  # sorts before the current file: not read
    write(tmp_path / "002.jsonl", {"n": 3}, {"n": 4}, newline=False)
    nxt = reader.latestOffset(end, ReadAllAvailable())
    rows = raw_rows(reader.read(reader.partitions(end, nxt)[0]))
    # 002's last line has no newline and no later file: it waits.
    assert [(r[1], json.loads(r[2])) for r in rows] == [(3, {"n": 2}), (4, {"n": 3})]
    assert rows == raw_rows(reader.read(reader.partitions(end, nxt)[0]))  # a replay
    assert all(r[3] == nxt["ts"] for r in rows)
    write(tmp_path / "003.jsonl", {"n": 5})
    last = reader.latestOffset(nxt, ReadAllAvailable())
    rows = raw_rows(reader.read(reader.partitions(nxt, last)[0]))
    assert [json.loads(r[2]) for r in rows] == [{"n": 4}, {"n": 5}]
    assert reader.partitions(last, last) == []
    assert listed(str(tmp_path / "missing")) == []


def test_a_source_path_escaping_the_root_is_a_problem_with_its_json_path(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from pipeline_stages import parse_stage
    from pipeline_stages._base import ProblemCollector
    from pipeline_stages._connectors.sources.files import read_file_stream
    from pipeline_stages._stream.context import ConnectionInfo

    (tmp_path / "a.jsonl").write_text("{}\n", encoding="utf-8")
    connection = ConnectionInfo("files", "File", {"directory": str(tmp_path)})
    problems = ProblemCollector()
    ctx = SimpleNamespace(problems=problems, spark=None)  # never reached: no stream is built
    for path in ("../elsewhere", "a.jsonl"):
        spec = parse_stage({"$source": {"connectionName": "files", "path": path}}).spec
        assert read_file_stream(spec, ctx, connection, "/pipeline/0/$source") is None
    assert [(p.code, p.path) for p in problems.problems] == [
        ("invalid_value", "/pipeline/0/$source/path"),
        ("invalid_value", "/pipeline/0/$source/path"),
    ]
    assert "leaves the File connection's directory" in problems.problems[0].message
    assert "is a file" in problems.problems[1].message
