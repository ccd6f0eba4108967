"""`sluice processors ...`: create, list, show, modify, start, stop, drop, stats, sample."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.table import Table

from service.cli.output import (
    JsonOption,
    api_call,
    print_json,
    print_line,
    print_warnings,
    read_text,
    state_of,
    table,
    usage_error,
    wants_json,
)

processors_app = typer.Typer(
    help="Create, run and inspect stream processors.", no_args_is_help=True
)

Name = Annotated[str, typer.Argument(help="Processor name.")]
DlqOption = Annotated[
    str | None, typer.Option("--dlq", help="DLQ target as CONNECTION/DB/COLL (e.g. local/db/dlq).")
]


def _dlq_target(ctx: typer.Context, value: str | None) -> dict[str, str] | None:
    if value is None:
        return None
    parts = value.split("/")
    if len(parts) != 3 or not all(parts):
        usage_error(state_of(ctx), f"--dlq takes CONNECTION/DB/COLL, got {value!r}")
    return {"connectionName": parts[0], "db": parts[1], "coll": parts[2]}


def _pipeline_file(ctx: typer.Context, source: str) -> tuple[Any, dict[str, Any]]:
    """A pipeline array, or `{"pipeline": [...], "options": {...}}`, from a file or stdin."""
    try:
        document = json.loads(read_text(source))
    except (OSError, ValueError) as error:
        usage_error(state_of(ctx), f"cannot read a pipeline from {source}: {error}")
    if isinstance(document, dict) and "pipeline" in document:
        options = document.get("options") if isinstance(document.get("options"), dict) else {}
        return document["pipeline"], options or {}
    return document, {}


def _summary(processor: dict[str, Any]) -> list[Any]:
    stats = processor.get("stats") or {}
    error = (processor.get("error") or {}).get("message", "")
    return [
        processor["name"] + (" (ephemeral)" if processor.get("ephemeral") else ""),
        processor["state"],
        stats.get("inputMessageCount", 0),
        stats.get("outputMessageCount", 0),
        stats.get("dlqMessageCount", 0),
        processor.get("lastStateChange", ""),
        error[:60],
    ]


_COLUMNS = ("NAME", "STATE", "INPUT", "OUTPUT", "DLQ", "LAST STATE CHANGE", "ERROR")


def _show(ctx: typer.Context, processor: dict[str, Any], as_json: bool) -> None:
    state = state_of(ctx)
    if wants_json(ctx, as_json):
        print_json(state, processor)
        return
    table(state, _COLUMNS, [_summary(processor)])
    print_warnings(state, processor)


# --------------------------------------------------------------------------- processors


@processors_app.command("create")
def create(
    ctx: typer.Context,
    name: Name,
    pipeline_file: Annotated[str, typer.Argument(help="Pipeline JSON file, or - for stdin.")],
    dlq: DlqOption = None,
    start: Annotated[bool, typer.Option("--start", help="Start it right away.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Create a processor from a pipeline file (every problem is listed if it is invalid)."""
    pipeline, options = _pipeline_file(ctx, pipeline_file)
    target = _dlq_target(ctx, dlq) or options.get("dlq")
    with api_call(state_of(ctx), "Compiling the pipeline…") as client:
        processor = client.create_processor(name, pipeline, dlq=target)
        if start:
            warnings = processor.get("warnings")
            processor = client.start_processor(name)
            processor["warnings"] = warnings
    _show(ctx, processor, as_json)


@processors_app.command("list")
def list_processors(
    ctx: typer.Context,
    page: Annotated[int, typer.Option(min=1)] = 1,
    per_page: Annotated[int, typer.Option("--per-page", min=1, max=500)] = 100,
    as_json: JsonOption = False,
) -> None:
    """List processors with their state and counts."""
    with api_call(state_of(ctx)) as client:
        body = client.list_processors(page=page, per_page=per_page)
    if wants_json(ctx, as_json):
        print_json(state_of(ctx), body)
        return
    table(state_of(ctx), _COLUMNS, [_summary(p) for p in body["results"]])


@processors_app.command("show")
def show(ctx: typer.Context, name: Name, as_json: JsonOption = False) -> None:
    """Show one processor (definition, state, stats)."""
    with api_call(state_of(ctx)) as client:
        processor = client.get_processor(name)
    if wants_json(ctx, as_json):
        print_json(state_of(ctx), processor)
        return
    _show(ctx, processor, False)
    state_of(ctx).stdout.print_json(
        json.dumps({"pipeline": processor["pipeline"], "options": processor["options"]})
    )


@processors_app.command("modify")
def modify(
    ctx: typer.Context,
    name: Name,
    pipeline_file: Annotated[
        str | None, typer.Option("--pipeline", help="New pipeline file.")
    ] = None,
    rename: Annotated[str | None, typer.Option("--rename", help="New name.")] = None,
    dlq: DlqOption = None,
    no_dlq: Annotated[bool, typer.Option("--no-dlq", help="Remove the DLQ.")] = False,
    fresh: Annotated[bool, typer.Option("--fresh", help="resumeFromCheckpoint: false.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Modify a processor that is not started (name, pipeline, DLQ)."""
    changes: dict[str, Any] = {"options": {"resumeFromCheckpoint": not fresh}}
    if pipeline_file is not None:
        changes["pipeline"] = _pipeline_file(ctx, pipeline_file)[0]
    if rename is not None:
        changes["name"] = rename
    if no_dlq:
        changes["options"]["dlq"] = {}
    elif dlq is not None:
        changes["options"]["dlq"] = _dlq_target(ctx, dlq)
    with api_call(state_of(ctx), "Compiling the pipeline…") as client:
        processor = client.modify_processor(name, changes)
    _show(ctx, processor, as_json)


@processors_app.command("start")
def start(
    ctx: typer.Context,
    name: Name,
    fresh: Annotated[bool, typer.Option("--fresh", help="Ignore the checkpoint.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Start a processor (from its checkpoint unless --fresh)."""
    with api_call(state_of(ctx), f"Starting {name}…") as client:
        processor = client.start_processor(name, resume=not fresh)
    _show(ctx, processor, as_json)


@processors_app.command("stop")
def stop(ctx: typer.Context, name: Name, as_json: JsonOption = False) -> None:
    """Stop a processor (its checkpoint is kept)."""
    with api_call(state_of(ctx), f"Stopping {name}…") as client:
        processor = client.stop_processor(name)
    _show(ctx, processor, as_json)


@processors_app.command("drop")
def drop(ctx: typer.Context, name: Name, as_json: JsonOption = False) -> None:
    """Delete a processor with its checkpoints (its DLQ collection is kept)."""
    with api_call(state_of(ctx), f"Dropping {name}…") as client:
        client.drop_processor(name)
    if wants_json(ctx, as_json):
        print_json(state_of(ctx), {"dropped": name})
    else:
        state_of(ctx).stdout.print(f"dropped {name}", markup=False)


@processors_app.command("stats")
def stats(
    ctx: typer.Context,
    name: Name,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
    kib: Annotated[bool, typer.Option("--kib", help="Sizes in KiB (scale 1024).")] = False,
    watch: Annotated[
        bool, typer.Option("--watch", "-w", help="Keep refreshing until Ctrl-C.")
    ] = False,
    interval: Annotated[
        float, typer.Option(min=0.2, help="With --watch: seconds between refreshes.")
    ] = 2.0,
    seconds: Annotated[
        float | None, typer.Option(help="With --watch: stop after this long.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Show Atlas-style stats (counts, sizes, watermark and lag, open windows, DLQ by reason
    and operator; --verbose per operator). Dates print as ISO 8601."""
    state = state_of(ctx)
    scale = 1024 if kib else 1
    deadline = None if seconds is None else time.monotonic() + seconds
    with api_call(state) as client:
        body = client.stats(name, verbose=verbose, scale=scale)
        if wants_json(ctx, as_json):
            print_json(state, body)
            while watch and (deadline is None or time.monotonic() < deadline):
                time.sleep(interval)  # one JSON document per refresh
                print_json(state, client.stats(name, verbose=verbose, scale=scale))
            return
        if not watch:
            state.stdout.print(stats_view(body))
            return
        try:
            with Live(stats_view(body), console=state.stdout, auto_refresh=False) as live:
                while deadline is None or time.monotonic() < deadline:
                    time.sleep(interval)
                    live.update(stats_view(client.stats(name, verbose=verbose, scale=scale)))
                    live.refresh()
        except KeyboardInterrupt:
            return


def _cell(value: Any) -> str:
    """A stats value as the CLI prints it: dates as ISO 8601, maps as `key: value` lines."""
    if value is None:
        return "no data"
    if isinstance(value, dict) and set(value) == {"$date"}:
        return str(value["$date"])
    if isinstance(value, dict):
        return "\n".join(f"{k}: {_cell(v)}" for k, v in value.items()) or "none"
    return str(value)


def stats_view(body: dict[str, Any]) -> Group:
    """The stats as rich tables: one field per row, then one operator per row."""
    fields = Table("FIELD", "VALUE", header_style="bold")
    for key, value in body.items():
        if key == "throttle" and isinstance(value, dict):
            # Atlas names them `throttle.throttledTimeMs` and `throttle.throttleEvents`.
            for name, figure in value.items():
                fields.add_row(f"throttle.{name}", _cell(figure))
        elif key == "sourceLag" and isinstance(value, dict):
            fields.add_row("sourceLag.totalLag", _cell(value.get("totalLag")))
            for part in value.get("partitions") or []:
                fields.add_row(
                    f"sourceLag {part['topic']}/{part['partition']}",
                    f"{_cell(part['lag'])} (processed {_cell(part['processedOffset'])} "
                    f"of {part['latestOffset']})",
                )
        elif not isinstance(value, list) and key != "lastBatch":
            fields.add_row(key, _cell(value))
    if isinstance(body.get("lastBatch"), dict):
        fields.add_row("lastBatch", _cell(body["lastBatch"]))
    parts: list[Table] = [fields]
    operators = [_flat(op) for op in body.get("operatorStats") or []]
    if operators:
        columns = sorted({key for op in operators for key in op} - {"name"})
        grid = Table("OPERATOR", *columns, header_style="bold")
        for op in operators:
            grid.add_row(op["name"], *(_cell(op[c]) if c in op else "" for c in columns))
        parts.append(grid)
    return Group(*parts)


def _flat(operator: dict[str, Any]) -> dict[str, Any]:
    """An operator's stats with nested objects (`latencyMs`) as dotted columns."""
    out: dict[str, Any] = {}
    for key, value in operator.items():
        if isinstance(value, dict):
            out.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


@processors_app.command("sample")
def sample(
    ctx: typer.Context,
    name: Name,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 20,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new messages.")
    ] = False,
    seconds: Annotated[
        float | None, typer.Option(help="With --follow: stop after this long.")
    ] = None,
) -> None:
    """Print recent output documents and DLQ messages, one JSON object per line."""
    state = state_of(ctx)
    deadline = None if seconds is None else time.monotonic() + seconds
    cursor = None
    with api_call(state) as client:
        while True:
            body = client.sample(name, limit=limit, after=cursor)
            for message in body["messages"]:
                print_line(state, message)
            cursor = body.get("cursorId") or cursor
            if not follow or (deadline is not None and time.monotonic() >= deadline):
                return
            time.sleep(1.0)
