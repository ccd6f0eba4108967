"""How `sluice demo` shows what arrives: a live rich table, or JSON lines with `--json`.

The table keeps the newest `ROWS` window results and DLQ records, one row each: a window
result's window, panel group and aggregates, a DLQ record's reason and operator. On a
terminal it redraws in place as messages arrive; on a pipe rich prints the final table when
the demo ends. With `--json` every message is one JSON object per line, for scripts.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from typing import Any, Protocol, TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

#: Rows the live table keeps (the newest).
ROWS = 20
COLUMNS = ("kind", "window", "group", "readings", "avg watts", "max temp", "DLQ reason")


class DemoView(Protocol):
    """Where the demo's messages go."""

    def show(self, message: Mapping[str, Any]) -> None:
        """One output document or `{"_dlqMessage": ...}`."""

    def close(self) -> None:
        """The demo ends (the table's last state stays on screen)."""


class JsonLines:
    """One JSON object per message on `out`."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def show(self, message: Mapping[str, Any]) -> None:
        """Print the message as a line of JSON."""
        self._out.write(json.dumps(message) + "\n")
        self._out.flush()

    def close(self) -> None:
        """Nothing to close."""


class LiveTable:
    """The newest messages as a table redrawn in place (see the module docstring)."""

    def __init__(self, out: TextIO) -> None:
        self._rows: deque[tuple[str, ...]] = deque(maxlen=ROWS)
        self.results = 0
        self.dlq = 0
        console = Console(file=out, width=max(100, Console(file=out).width))
        self._live = Live(self._table(), console=console, auto_refresh=False)
        self._live.start()

    def show(self, message: Mapping[str, Any]) -> None:
        """Add the message's row and redraw."""
        self._rows.append(row_of(message))
        if "_dlqMessage" in message:
            self.dlq += 1
        else:
            self.results += 1
        self._live.update(self._table(), refresh=True)

    def close(self) -> None:
        """Stop redrawing; the last table stays."""
        self._live.update(self._table(), refresh=True)
        self._live.stop()

    def _table(self) -> Table:
        title = f"sluice demo: {self.results} window results, {self.dlq} DLQ records"
        if len(self._rows) == ROWS:
            title += f" (newest {ROWS})"
        table = Table(title=title, title_justify="left")
        for column in COLUMNS:
            table.add_column(column, no_wrap=column != "DLQ reason")
        for row in self._rows:
            table.add_row(*row)
        return table


def view(out: TextIO, *, as_json: bool) -> DemoView:
    """JSON lines or the live table."""
    return JsonLines(out) if as_json else LiveTable(out)


def row_of(message: Mapping[str, Any]) -> tuple[str, ...]:
    """A message's cells, in `COLUMNS` order ("" where a column does not apply)."""
    dlq = message.get("_dlqMessage")
    if isinstance(dlq, Mapping):
        reason = str((dlq.get("errInfo") or {}).get("reason", ""))
        operator = str(dlq.get("operatorName", ""))
        return ("DLQ", "", "", "", "", "", f"{reason} ({operator})" if operator else reason)
    window = (message.get("_stream_meta") or {}).get("window") or {}
    span = f"{_time(window.get('start'))}–{_time(window.get('end'))}" if window else ""
    return (
        "result",
        span,
        _cell(message.get("_id")),
        _cell(message.get("readings")),
        _cell(message.get("avg_watts")),
        _cell(message.get("max_temp")),
        "",
    )


def _time(value: Any) -> str:
    """A window bound as HH:MM:SS (from `{"$date": ISO}` or an ISO string)."""
    text = value.get("$date") if isinstance(value, Mapping) else value
    if not isinstance(text, str):
        return _cell(text)
    clock = text.partition("T")[2] or text
    return clock[:8]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.1f}"
    return value if isinstance(value, str) else json.dumps(value)
