"""`sluice connections ...` (`sluice dlq ...` is in `service.cli.dlq`)."""

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

connections_app = typer.Typer(help="Manage the connection registry.", no_args_is_help=True)

# --------------------------------------------------------------------------- connections


def _key_values(ctx: typer.Context, pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            usage_error(state_of(ctx), f"--config takes KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


@connections_app.command("create")
def connection_create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Connection name.")],
    kind: Annotated[
        str, typer.Option("--type", help="Kafka, Cluster, HttpIngest, Sample, File or Https.")
    ],
    bootstrap_servers: Annotated[str | None, typer.Option("--bootstrap-servers")] = None,
    security_protocol: Annotated[str | None, typer.Option("--security-protocol")] = None,
    mechanism: Annotated[str | None, typer.Option("--mechanism", help="SASL mechanism.")] = None,
    username: Annotated[str | None, typer.Option("--username")] = None,
    password: Annotated[
        str | None, typer.Option("--password", envvar="SLUICE_CONNECTION_PASSWORD")
    ] = None,
    config: Annotated[
        list[str] | None, typer.Option("--config", help="Kafka KEY=VALUE (repeat).")
    ] = None,
    uri: Annotated[str | None, typer.Option("--uri", help="Cluster: MongoDB URI.")] = None,
    directory: Annotated[str | None, typer.Option("--directory", help="File: directory.")] = None,
    rate: Annotated[float | None, typer.Option("--rate", help="Sample: documents/s.")] = None,
    url: Annotated[str | None, typer.Option("--url", help="Https: base URL.")] = None,
    header: Annotated[
        list[str] | None, typer.Option("--header", help="Https: NAME=VALUE header (repeat).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Register a connection (secrets are stored but never shown again)."""
    body: dict[str, Any] = {"name": name, "type": kind}
    if bootstrap_servers:
        body["bootstrapServers"] = bootstrap_servers
    if security_protocol:
        body["security"] = {"protocol": security_protocol}
    if mechanism:
        auth = {"mechanism": mechanism, "username": username, "password": password}
        body["authentication"] = {k: v for k, v in auth.items() if v is not None}
    if config:
        body["config"] = _key_values(ctx, config)
    if header:
        body["headers"] = _key_values(ctx, header)
    for key, value in (("uri", uri), ("directory", directory), ("rate", rate), ("url", url)):
        if value is not None:
            body[key] = value
    with api_call(state_of(ctx)) as client:
        created = client.create_connection(body)
    if wants_json(ctx, as_json):
        print_json(state_of(ctx), created)
    else:
        state_of(ctx).stdout.print(
            f"created {created['type']} connection {created['name']}", markup=False
        )


@connections_app.command("list")
def connection_list(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List connections (built-in ones first), without secrets."""
    with api_call(state_of(ctx)) as client:
        body = client.list_connections()
    if wants_json(ctx, as_json):
        print_json(state_of(ctx), body)
        return
    rows = []
    for conn in body["results"]:
        details = {
            k: v for k, v in conn.items() if k not in ("name", "type", "builtIn", "createdAt")
        }
        rows.append(
            [conn["name"], conn["type"], "yes" if conn.get("builtIn") else "", json.dumps(details)]
        )
    table(state_of(ctx), ("NAME", "TYPE", "BUILT IN", "DETAILS"), rows)


@connections_app.command("drop")
def connection_drop(
    ctx: typer.Context, name: Annotated[str, typer.Argument()], as_json: JsonOption = False
) -> None:
    """Delete a connection that no processor uses."""
    with api_call(state_of(ctx)) as client:
        client.drop_connection(name)
    if wants_json(ctx, as_json):
        print_json(state_of(ctx), {"dropped": name})
    else:
        state_of(ctx).stdout.print(f"dropped {name}", markup=False)


@connections_app.command("test")
def connection_test(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A Kafka connection.")],
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, max=60, help="Seconds to wait for the brokers.")
    ] = 10.0,
    as_json: JsonOption = False,
) -> None:
    """Check a Kafka connection: the brokers answer and list their topics (exit 1 if not)."""
    state = state_of(ctx)
    with api_call(state, status=f"asking the brokers of {name}…") as client:
        body = client.test_connection(name, timeout=timeout)
    if wants_json(ctx, as_json):
        print_json(state, body)
    elif body["ok"]:
        topics = ", ".join(body["topics"]) or "(none)"
        state.stdout.print(
            f"{name}: reachable in {body['elapsedMs']} ms; brokers {', '.join(body['brokers'])}; "
            f"{len(body['topics'])} topic(s): {topics}",
            markup=False,
        )
    else:
        state.stderr.print(f"{name}: {body['error']['message']}", markup=False, highlight=False)
    if not body["ok"]:
        raise typer.Exit(1)
