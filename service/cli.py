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


if __name__ == "__main__":
    app()
