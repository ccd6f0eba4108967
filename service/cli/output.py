"""CLI plumbing shared by the commands: state, the client, output and error rendering.

Output goes to stdout (rich tables, or JSON with `--json` for scripts); errors and progress
go to stderr. An API error prints the service's detail and then its problem list verbatim,
path first, and exits 2 for invalid input (422) and 1 otherwise.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, NoReturn

import httpx
import typer
from rich.console import Console
from rich.table import Table

from service.cli.client import ApiError, SluiceClient, http_client, resolve_target

EXIT_ERROR = 1
EXIT_INVALID = 2

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (for scripts).")]


@dataclass
class CliState:
    """Global options and the (injectable) HTTP client.

    Tests set `http` to FastAPI's `TestClient(app)` or an `httpx.Client` on a
    `MockTransport`, and pass the state as `obj` to typer's runner.
    """

    url: str | None = None
    api_key: str | None = None
    config: str | None = None
    json: bool = False
    http: httpx.Client | None = None
    stdout: Console = field(default_factory=lambda: Console(soft_wrap=True))
    stderr: Console = field(default_factory=lambda: Console(stderr=True, soft_wrap=True))

    def client(self) -> SluiceClient:
        """The API client (built on first use from flags, environment and config file)."""
        if self.http is None:
            try:
                self.http = http_client(resolve_target(self.url, self.api_key, self.config))
            except ValueError as error:
                self.stderr.print(f"error: {error}", markup=False)
                raise typer.Exit(EXIT_ERROR) from None
        return SluiceClient(self.http)


def state_of(ctx: typer.Context) -> CliState:
    """The CLI state stored by the app callback."""
    root = ctx.find_root()
    if not isinstance(root.obj, CliState):
        root.obj = CliState()
    return root.obj


def wants_json(ctx: typer.Context, flag: bool) -> bool:
    """`--json` given on the command or before it."""
    return flag or state_of(ctx).json


def fail(state: CliState, error: ApiError) -> NoReturn:
    """Print an API error (detail, then problems path first) and exit."""
    label = f"{error.status} {error.code}" if error.status else error.code
    state.stderr.print(f"error: {error.detail} ({label})", markup=False, highlight=False)
    for problem in error.problems:
        path = problem.get("path") or "/"
        line = f"  {path}: {problem.get('message', '')} [{problem.get('code', '')}]"
        state.stderr.print(line, markup=False, highlight=False)
    for warning in error.body.get("warnings") or []:
        line = f"  warning {warning.get('path') or '/'}: {warning.get('message', '')}"
        state.stderr.print(line, markup=False, highlight=False)
    raise typer.Exit(EXIT_INVALID if error.status == 422 else EXIT_ERROR)


@contextmanager
def api_call(state: CliState, status: str | None = None) -> Iterator[SluiceClient]:
    """A client for one command; API errors are printed and turned into exit codes.

    `status` shows a spinner on stderr meanwhile (long operations: Spark may be starting).
    """
    client = state.client()
    try:
        if status and not state.json and state.stderr.is_terminal:
            with state.stderr.status(status):
                yield client
        else:
            yield client
    except ApiError as error:
        fail(state, error)


def print_json(state: CliState, value: Any) -> None:
    """JSON on stdout (not rich-formatted, so scripts can parse it)."""
    state.stdout.file.write(json.dumps(value, indent=2) + "\n")
    state.stdout.file.flush()


def print_line(state: CliState, value: Any) -> None:
    """One JSON object per line on stdout."""
    state.stdout.file.write(json.dumps(value) + "\n")
    state.stdout.file.flush()


def print_warnings(state: CliState, body: dict[str, Any]) -> None:
    """A created/modified processor's lint warnings, path first, on stderr."""
    for warning in body.get("warnings") or []:
        line = f"warning {warning.get('path') or '/'}: {warning.get('message', '')}"
        state.stderr.print(line, markup=False, highlight=False)


def table(state: CliState, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A rich table on stdout."""
    grid = Table(*columns, show_lines=False, header_style="bold")
    for row in rows:
        grid.add_row(*("" if cell is None else str(cell) for cell in row))
    state.stdout.print(grid)


def read_text(source: str) -> str:
    """A file's text, or stdin for `-`."""
    return sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")


def usage_error(state: CliState, message: str) -> NoReturn:
    """Print a usage problem and exit 2."""
    state.stderr.print(f"error: {message}", markup=False, highlight=False)
    raise typer.Exit(EXIT_INVALID)
