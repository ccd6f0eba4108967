"""How a query's work divides over tasks: per stage, the largest task's share of the rows.

Reads a Spark event log (`spark.eventLog.enabled=true`, `spark.eventLog.dir=DIR`; plain or
zstd-compressed, a file or a rolling-log directory) and prints, for each stage that handled at
least `--min-rows` rows, its tasks, the rows they read (records read from the source plus
records read from a shuffle), the largest task's share and the executors that ran them; then,
per kind of stage (reading the source, or reading a shuffle: the window's keyed step), the
median and the worst share. Whether the work divides over a cluster ("no task gets more than
60 % of a batch's rows") is read here from Spark's own task metrics. A `zstd` binary reads
compressed logs (Spark's default codec for event logs).

    python benchmarks/task_shares.py /tmp/evlog [--min-rows 1000] [--stages]

`--stages` also lists every stage. Run a service with the event log on, e.g.
`SLUICE_SPARK_CONF='{"spark.eventLog.enabled": "true", "spark.eventLog.dir": "/tmp/evlog"}'`
(`benchmarks/e2e_throughput.py --service-env ...`).
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class StageShare:
    """One stage's tasks: rows per task and where they ran."""

    stage_id: int
    name: str = ""
    rows: list[int] = field(default_factory=list)
    executors: set[str] = field(default_factory=set)
    #: Whether its tasks read a shuffle (the window's keyed step) or the source.
    shuffled: bool = False

    @property
    def kind(self) -> str:
        return "after a shuffle" if self.shuffled else "source read"

    @property
    def total(self) -> int:
        return sum(self.rows)

    @property
    def largest_share(self) -> float:
        return max(self.rows) / self.total if self.total else 0.0


def task_rows(metrics: dict[str, Any]) -> tuple[int, int]:
    """Rows a task read: (from its source, from a shuffle)."""
    source = int((metrics.get("Input Metrics") or {}).get("Records Read", 0) or 0)
    shuffled = int((metrics.get("Shuffle Read Metrics") or {}).get("Total Records Read", 0) or 0)
    return source, shuffled


def stage_shares(events: Iterable[dict[str, Any]]) -> list[StageShare]:
    """Each stage's successful tasks' rows, in stage order (failed attempts left out)."""
    stages: dict[int, StageShare] = {}
    for event in events:
        kind = event.get("Event")
        if kind == "SparkListenerTaskEnd":
            info = event.get("Task Info") or {}
            if info.get("Failed") or info.get("Killed"):
                continue
            stage = stages.setdefault(event["Stage ID"], StageShare(event["Stage ID"]))
            source, shuffled = task_rows(event.get("Task Metrics") or {})
            stage.rows.append(source + shuffled)
            stage.shuffled = stage.shuffled or shuffled > 0
            stage.executors.add(str(info.get("Executor ID", "?")))
        elif kind == "SparkListenerStageCompleted":
            info = event["Stage Info"]
            stage = stages.setdefault(info["Stage ID"], StageShare(info["Stage ID"]))
            stage.name = str(info.get("Stage Name", ""))
    return [stages[key] for key in sorted(stages)]


def log_files(path: Path) -> list[Path]:
    """The event log files under `path` (itself, or a directory's event files in order)."""
    if path.is_file():
        return [path]
    found = (p for p in path.rglob("*") if p.is_file() and not p.name.startswith("appstatus"))
    return sorted(found)


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON events of one log file (`.zstd` ones through the `zstd` tool). A log whose
    application was killed ends mid-line (and mid-frame): what was written is read."""
    if path.suffix == ".zstd":
        text = subprocess.run(
            ["zstd", "-q", "-d", "-c", str(path)], capture_output=True, check=False
        ).stdout.decode("utf-8", "replace")
        lines: Iterable[str] = io.StringIO(text)
    else:
        lines = path.open(encoding="utf-8", errors="replace")
    for line in lines:
        try:
            yield json.loads(line)
        except ValueError:
            continue  # a blank line, or the last one of a killed application


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="an event log file or directory")
    parser.add_argument("--min-rows", type=int, default=1000)
    parser.add_argument("--stages", action="store_true", help="list every stage")
    args = parser.parse_args(argv)
    by_name: dict[str, list[StageShare]] = defaultdict(list)
    for path in log_files(args.log):
        for stage in stage_shares(read_events(path)):
            if stage.total < args.min_rows:
                continue
            name = stage.kind
            by_name[name].append(stage)
            if args.stages:
                print(
                    f"stage {stage.stage_id:>5} {name:<15} tasks {len(stage.rows):>3} rows "
                    f"{stage.total:>8,} largest {stage.largest_share:6.1%} executors "
                    f"{','.join(sorted(stage.executors))}"
                )
    if not by_name:
        print(f"no stage with {args.min_rows:,} rows or more in {args.log}")
        return 1
    print(f"stages with >= {args.min_rows:,} rows: the largest task's share of each stage's rows")
    for name, found in sorted(by_name.items()):
        shares = [s.largest_share for s in found]
        tasks = statistics.median(len(s.rows) for s in found)
        executors = sorted(set().union(*(s.executors for s in found)))
        print(
            f"  {name:<15} {len(found):>4} stages, median {tasks:g} tasks: largest task "
            f"median {statistics.median(shares):.1%}, worst {max(shares):.1%}; "
            f"executors {', '.join(executors)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
