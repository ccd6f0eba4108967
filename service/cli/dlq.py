"""`sluice dlq list|count|show|purge|replay`: a processor's dead-letter queue."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from service.cli.output import (
    JsonOption,
    api_call,
    print_json,
    state_of,
    table,
    usage_error,
    wants_json,
)

dlq_app = typer.Typer(
    help="Inspect, purge and replay a processor's dead-letter queue.", no_args_is_help=True
)

Name = Annotated[str, typer.Argument(help="Processor name.")]
Reason = Annotated[
    str | None, typer.Option(help="errInfo.reason contains this text (ignoring case).")
]
Operator = Annotated[str | None, typer.Option("--operator", help="operatorName (exact).")]
Since = Annotated[str | None, typer.Option("--from", help="dlqTime >= this ISO date.")]
Until = Annotated[str | None, typer.Option("--to", help="dlqTime < this ISO date.")]
Mql = Annotated[str | None, typer.Option("--filter", help="MQL filter (JSON).")]

#: Characters of a document shown in the list (`dlq show` prints it whole).
PREVIEW_CHARS = 80


def _filters(
    reason: str | None, operator: str | None, since: str | None, until: str | None, mql: str | None
) -> dict[str, Any]:
    return {"reason": reason, "operatorName": operator, "from": since, "to": until, "filter": mql}


def preview(record: dict[str, Any]) -> str:
    """The record's document for the list: its own fields, without the stream metadata
    (`dlq show` has that), cut to `PREVIEW_CHARS`."""
    doc = record.get("doc", record.get("docText"))
    if isinstance(doc, dict):
        doc = {key: value for key, value in doc.items() if key != "_stream_meta"}
    text = doc if isinstance(doc, str) else json.dumps(doc, ensure_ascii=False)
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


@dlq_app.command("list")
def dlq_list(
    ctx: typer.Context,
    name: Name,
    reason: Reason = None,
    operator: Operator = None,
    since: Since = None,
    until: Until = None,
    mql: Mql = None,
    replayed: Annotated[
        bool | None, typer.Option("--replayed/--not-replayed", help="Replayed or never.")
    ] = None,
    replayed_to: Annotated[
        str | None, typer.Option("--replayed-to", help="processor:<name> or connection:<name>.")
    ] = None,
    limit: Annotated[int, typer.Option(min=0, max=1000)] = 20,
    skip: Annotated[int, typer.Option(min=0)] = 0,
    newest_first: Annotated[bool, typer.Option("--newest-first")] = False,
    as_json: JsonOption = False,
) -> None:
    """List a processor's DLQ documents by dlqTime (`dlq show NAME ID` prints one whole)."""
    filters = _filters(reason, operator, since, until, mql)
    flag = None if replayed is None else str(replayed).lower()
    sort = "desc" if newest_first else "asc"
    with api_call(state_of(ctx)) as client:
        body = client.dlq(
            name,
            **filters,
            replayed=flag,
            replayedTo=replayed_to,
            limit=limit,
            skip=skip,
            sort=sort,
        )
    if wants_json(ctx, as_json):
        print_json(state_of(ctx), body)
        return
    rows = [
        [
            preview(record),
            (record.get("errInfo") or {}).get("reason", ""),
            record.get("operatorName", ""),
            (record.get("dlqTime") or {}).get("$date", ""),
            record.get("_id", ""),
        ]
        for record in body["results"]
    ]
    table(state_of(ctx), ("DOC", "REASON", "OPERATOR", "DLQ TIME", "ID"), rows)
    state_of(ctx).stdout.print(f"{len(rows)} of {body['totalCount']}", markup=False)


@dlq_app.command("show")
def dlq_show(
    ctx: typer.Context,
    name: Name,
    record_id: Annotated[str, typer.Argument(metavar="ID", help="The record's _id.")],
) -> None:
    """Print one DLQ record whole (JSON): its document, errInfo and stream metadata."""
    state = state_of(ctx)
    with api_call(state) as client:
        body = client.dlq(name, filter=json.dumps({"_id": record_id}), limit=1)
    if not body["results"]:
        state.stderr.print(f"error: {name} has no DLQ record {record_id!r}", markup=False)
        raise typer.Exit(1)
    print_json(state, body["results"][0])


@dlq_app.command("count")
def dlq_count(
    ctx: typer.Context,
    name: Name,
    reason: Reason = None,
    operator: Operator = None,
    since: Since = None,
    until: Until = None,
    mql: Mql = None,
    as_json: JsonOption = False,
) -> None:
    """Count a processor's DLQ documents."""
    with api_call(state_of(ctx)) as client:
        body = client.dlq(name, **_filters(reason, operator, since, until, mql), limit=0)
    if wants_json(ctx, as_json):
        print_json(state_of(ctx), {"count": body["totalCount"]})
    else:
        state_of(ctx).stdout.print(str(body["totalCount"]), markup=False)


@dlq_app.command("purge")
def dlq_purge(
    ctx: typer.Context,
    name: Name,
    reason: Reason = None,
    operator: Operator = None,
    since: Since = None,
    until: Until = None,
    mql: Mql = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Delete a processor's DLQ documents (those matching the filters, or all)."""
    if not yes and not typer.confirm(f"Delete DLQ documents of {name}?"):
        raise typer.Exit(1)
    with api_call(state_of(ctx)) as client:
        body = client.purge_dlq(name, **_filters(reason, operator, since, until, mql))
    if wants_json(ctx, as_json):
        print_json(state_of(ctx), body)
    else:
        state_of(ctx).stdout.print(f"deleted {body['deletedCount']}", markup=False)


@dlq_app.command("replay")
def dlq_replay(
    ctx: typer.Context,
    name: Name,
    to_processor: Annotated[
        str | None, typer.Option("--to-processor", help="A processor reading an HttpIngest.")
    ] = None,
    to_connection: Annotated[
        str | None, typer.Option("--to-connection", help="An HttpIngest connection.")
    ] = None,
    reason: Reason = None,
    operator: Operator = None,
    since: Since = None,
    until: Until = None,
    mql: Mql = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count only.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Send the matching records' documents into a processor's input (or an HttpIngest
    connection) as if they arrived now; each record at most once per target."""
    state = state_of(ctx)
    if (to_processor is None) == (to_connection is None):
        usage_error(state, "give exactly one of --to-processor and --to-connection")
    target = {"processor": to_processor} if to_processor else {"connectionName": to_connection}
    body: dict[str, Any] = {"target": target, "dryRun": dry_run}
    filters = {"reason": reason, "operatorName": operator, "from": since, "to": until}
    body.update({key: value for key, value in filters.items() if value is not None})
    if mql is not None:
        try:
            body["filter"] = json.loads(mql)
        except ValueError as error:
            usage_error(state, f"--filter is not JSON: {error}")
    with api_call(state, status="replaying…") as client:
        result = client.replay_dlq(name, body)
    if wants_json(ctx, as_json):
        print_json(state, result)
        return
    verb = "would replay" if dry_run else "replayed"
    where = f"processor {to_processor}" if to_processor else f"connection {to_connection}"
    state.stdout.print(
        f"{verb} {result['replayed']} record(s) to {where}; skipped {result['skipped']} "
        f"already replayed there; {result['notReplayable']} not replayable (not a JSON object)",
        markup=False,
    )
