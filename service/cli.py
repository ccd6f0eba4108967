"""The `sluice` command line (typer + rich)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="sluice",
    help="Sluice: Atlas-style stream processing on Apache Spark.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def main() -> None:
    """Sluice: Atlas-style stream processing on Apache Spark."""


def _read_document(source: str) -> object:
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    return json.loads(text)


@app.command()
def process(
    pipeline_file: Annotated[str, typer.Argument(help="Pipeline JSON file, or - for stdin.")],
    batch_size: Annotated[
        int | None,
        typer.Option("--batch-size", min=1, help="Documents per micro-batch (documents source)."),
    ] = None,
    max_seconds: Annotated[
        float, typer.Option("--max-seconds", help="Stop after this long (Atlas: 10 minutes).")
    ] = 600.0,
) -> None:
    """Run a pipeline ephemerally on a local SparkSession, like Atlas's sp.process."""
    from service.process import EXIT_INVALID, run_process

    try:
        document = _read_document(pipeline_file)
    except (OSError, json.JSONDecodeError) as error:
        problem = {"code": "invalid_json", "path": "", "message": str(error)}
        sys.stderr.write(json.dumps({"problems": [problem]}) + "\n")
        raise typer.Exit(EXIT_INVALID) from None
    code = run_process(
        document,
        out=sys.stdout,
        err=sys.stderr,
        batch_size=batch_size,
        max_seconds=max_seconds,
    )
    raise typer.Exit(code)


DEMO_PIPELINE: list[dict[str, object]] = [
    {
        "$source": {
            "connectionName": "sample_stream_solar",
            "timeField": {"$dateFromString": {"dateString": "$timestamp"}},
        }
    },
    {
        "$validate": {
            "validator": {"obs.watts": {"$lte": 500}},
            "validationAction": "dlq",
        }
    },
    {"$match": {"event_type": 0}},
    {
        "$addFields": {
            "load": {"$round": [{"$divide": ["$obs.watts", "$max_watts"]}, 2]},
        }
    },
    {"$project": {"_id": 0, "device_id": 1, "group_id": 1, "load": 1, "obs": 1, "_ts": 1}},
]


@app.command()
def demo(
    seconds: Annotated[float, typer.Option("--seconds", help="How long to run the demo.")] = 30.0,
) -> None:
    """Run a sample pipeline over Atlas's generated solar stream and print what it emits."""
    from service.process import run_process

    sys.stderr.write(
        "sluice demo: reading sample_stream_solar through $validate/$match/$addFields/$project"
        f" for {seconds:g} s (first results after Spark starts, 15-40 s)\n"
    )
    code = run_process(DEMO_PIPELINE, out=sys.stdout, err=sys.stderr, max_seconds=seconds)
    raise typer.Exit(code)


if __name__ == "__main__":
    app()
