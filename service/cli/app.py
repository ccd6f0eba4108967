"""The `sluice` command line (typer + rich).

* `sluice serve`: run the service (REST API, processors on Spark);
* `sluice demo`: the service on embedded defaults with a processor on the sample stream;
* `sluice processors|dlq|connections ...` and `sluice ingest`: talk to a running service;
* `sluice process`: run one pipeline ephemerally (Atlas's `sp.process`), on a running
  service's warm SparkSession when one answers, else (or with `--local`) in-process;
* `sluice validate`: a pipeline's problems, locally, without Spark;
* `sluice cluster up|down|status`: a local Spark standalone cluster to run the service on.

Client commands find the service from `--url` / `--api-key` / `--config`, the variables
`SLUICE_URL` / `SLUICE_API_KEY` / `SLUICE_CONFIG`, a config file, or the key a local service
generated in its data directory (see `service.cli.client.resolve_target`).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from service.cli.client import resolve_target
from service.cli.cluster import cluster_app
from service.cli.dlq import dlq_app
from service.cli.ingest import send_file
from service.cli.output import (
    CliState,
    JsonOption,
    api_call,
    print_json,
    read_text,
    state_of,
    usage_error,
    wants_json,
)
from service.cli.process import EXIT_INVALID, run_remote, service_answers
from service.cli.processors import processors_app
from service.cli.resources import connections_app
from service.config.private_files import UnsafeDirectory
from service.config.settings import Settings

app = typer.Typer(
    name="sluice",
    help="Sluice: Atlas-style stream processing on Apache Spark.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(processors_app, name="processors")
app.add_typer(dlq_app, name="dlq")
app.add_typer(connections_app, name="connections")
app.add_typer(cluster_app, name="cluster")


@app.callback()
def main(
    ctx: typer.Context,
    url: Annotated[str | None, typer.Option("--url", help="Service URL (or SLUICE_URL).")] = None,
    api_key: Annotated[
        str | None, typer.Option("--api-key", help="API key (or SLUICE_API_KEY).")
    ] = None,
    config: Annotated[
        str | None, typer.Option("--config", help="Config file (TOML: url, api_key, data_dir).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Sluice: Atlas-style stream processing on Apache Spark."""
    state = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
    state.url = url or state.url
    state.api_key = api_key or state.api_key
    state.config = config or state.config
    state.json = as_json or state.json
    ctx.obj = state


def _read_document(source: str) -> object:
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    return json.loads(text)


@app.command()
def process(
    ctx: typer.Context,
    pipeline_file: Annotated[str, typer.Argument(help="Pipeline JSON file, or - for stdin.")],
    batch_size: Annotated[
        int | None,
        typer.Option(
            "--batch-size",
            min=1,
            help="Documents per micro-batch of a documents source (default: its batchSize, "
            "else all of them).",
        ),
    ] = None,
    max_seconds: Annotated[
        float, typer.Option("--max-seconds", help="Stop after this long (Atlas: 10 minutes).")
    ] = 600.0,
    local: Annotated[
        bool, typer.Option("--local", help="Run on a SparkSession of its own, not the service's.")
    ] = False,
) -> None:
    """Run a pipeline ephemerally, like Atlas's sp.process: on a running service's warm
    SparkSession when one answers (found like the other commands), else locally.

    A local run takes its Spark settings from SLUICE_SPARK_CONF_FILE, SLUICE_SPARK_CONF and
    SLUICE_SPARK_CONF_<key> variables, as `sluice serve` does."""
    try:
        document = _read_document(pipeline_file)
    except (OSError, json.JSONDecodeError) as error:
        problem = {"code": "invalid_json", "path": "", "message": str(error)}
        sys.stderr.write(json.dumps({"problems": [problem]}) + "\n")
        raise typer.Exit(EXIT_INVALID) from None
    code: int | None = None
    if not local:
        state = state_of(ctx)
        try:
            target = resolve_target(state.url, state.api_key, state.config)
        except ValueError as error:
            usage_error(state, str(error))
        if service_answers(target):
            code = run_remote(
                document,
                target,
                out=sys.stdout,
                err=sys.stderr,
                batch_size=batch_size,
                max_seconds=max_seconds,
            )
    if code is None:
        from service.runtime.process import run_process  # Spark: only for a local run

        code = run_process(
            document, out=sys.stdout, err=sys.stderr, batch_size=batch_size, max_seconds=max_seconds
        )
    raise typer.Exit(code)


@app.command()
def validate(
    ctx: typer.Context,
    pipeline_file: Annotated[str, typer.Argument(help="Pipeline JSON file, or - for stdin.")],
    as_json: JsonOption = False,
) -> None:
    """Check a pipeline without a service or Spark: exit 0 valid, 1 invalid, 2 usage.

    The file holds a pipeline array or {"pipeline": [...], "options": {...}}. Connection
    names are checked by the service (POST /api/v1/pipelines:validate) and at create."""
    from service.cli.validate import run_validate

    state = state_of(ctx)
    try:
        text = read_text(pipeline_file)
    except (OSError, UnicodeDecodeError) as error:
        usage_error(state, f"cannot read {pipeline_file}: {error}")
    raise typer.Exit(run_validate(state, text, as_json=wants_json(ctx, as_json)))


@app.command()
def demo(
    ctx: typer.Context,
    seconds: Annotated[float, typer.Option("--seconds", help="How long to run the demo.")] = 60.0,
    data_dir: Annotated[
        str | None, typer.Option("--data-dir", help="Keep the demo's data here (default: temp).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run the service on embedded defaults with a processor on the sample solar stream.

    Window results and DLQ records are shown as they arrive in a live table (one JSON object
    per line with --json); progress and a closing summary go to stderr.
    """
    from service.cli.demo import run_demo

    code = run_demo(
        seconds=seconds,
        out=sys.stdout,
        err=sys.stderr,
        data_dir=data_dir,
        as_json=wants_json(ctx, as_json),
    )
    raise typer.Exit(code)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (SLUICE_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (SLUICE_PORT).")] = None,
    data_dir: Annotated[str | None, typer.Option("--data-dir", help="SLUICE_DATA_DIR.")] = None,
    store_url: Annotated[str | None, typer.Option("--store-url", help="SLUICE_STORE_URL.")] = None,
    spark_master: Annotated[
        str | None, typer.Option("--spark-master", help="SLUICE_SPARK_MASTER.")
    ] = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error.")] = "info",
) -> None:
    """Run the Sluice service (REST API on /api/v1, OpenAPI on /openapi.json) until SIGTERM/SIGINT."""
    import uvicorn

    from service.main import MAX_REQUEST_HEAD_BYTES, create_app
    from service.stores.secrets import SecretKeyError

    overrides = {
        key: value
        for key, value in {
            "host": host,
            "port": port,
            "data_dir": data_dir,
            "store_url": store_url,
            "spark_master": spark_master,
        }.items()
        if value is not None
    }
    try:
        settings = Settings(**overrides)  # type: ignore[arg-type]
        app_ = create_app(settings)
    except (UnsafeDirectory, SecretKeyError) as error:
        sys.stderr.write(f"sluice serve: refusing to start: {error}\n")
        raise typer.Exit(2) from None
    except (ValidationError, ValueError) as error:
        sys.stderr.write(f"sluice serve: invalid settings: {error}\n")
        raise typer.Exit(2) from None
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    key_note = (
        "API keys from SLUICE_API_KEYS"
        if settings.api_keys
        else f"API key in {settings.data_dir / 'api_key'}"
    )
    sys.stderr.write(
        f"sluice serve: http://{settings.host}:{settings.port} (data {settings.data_dir}; {key_note})\n"
    )
    uvicorn.run(
        app_,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        timeout_graceful_shutdown=30,
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES,
    )


@app.command()
def ingest(
    ctx: typer.Context,
    connection: Annotated[str, typer.Argument(help="An HttpIngest connection.")],
    source: Annotated[str, typer.Argument(help="NDJSON or JSON-array file, or - for stdin.")],
    chunk_bytes: Annotated[
        int, typer.Option("--chunk-bytes", min=1024, help="Bytes per request.")
    ] = 4 * 1024 * 1024,
    as_json: JsonOption = False,
) -> None:
    """Post records to an HttpIngest connection (durable once acknowledged)."""
    state = state_of(ctx)
    with api_call(state) as client:
        totals = send_file(client, connection, source, chunk_bytes=chunk_bytes, state=state)
    if wants_json(ctx, as_json):
        print_json(state, totals)
    else:
        state.stdout.print(
            f"accepted {totals['accepted']} record(s), {totals['invalid']} not JSON objects "
            "(those go to the DLQ of every processor reading the connection)",
            markup=False,
        )


if __name__ == "__main__":
    app()
