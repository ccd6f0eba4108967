"""Per-processor stats ledgers on SQLite (one row per processor; see :mod:`.stats_ledger`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .sqlite_db import SqliteDatabase
from .stats_ledger import StatsLedger


class SqliteStatsStore:
    """:class:`~service.stores.base.StatsStore` on SQLite: read, record and write back in one
    ``BEGIN IMMEDIATE`` transaction, so concurrent recorders cannot lose a batch."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def get(self, processor_id: str) -> StatsLedger | None:
        """The processor's ledger, or None before its first batch."""
        row = (
            self._db.connection()
            .execute("SELECT ledger FROM processor_stats WHERE processor_id = ?", (processor_id,))
            .fetchone()
        )
        return None if row is None else StatsLedger.from_json(row[0])

    def record(
        self,
        processor_id: str,
        lane: str,
        generation: int,
        batch_id: int,
        part: Mapping[str, Any],
        *,
        seed: Mapping[str, Any] | None = None,
    ) -> StatsLedger:
        """Record one batch's counts (a replay replaces them) and return the stored ledger."""
        with self._db.write() as conn:
            row = conn.execute(
                "SELECT ledger FROM processor_stats WHERE processor_id = ?", (processor_id,)
            ).fetchone()
            ledger = StatsLedger.seeded(seed) if row is None else StatsLedger.from_json(row[0])
            updated = ledger.record(lane, generation, batch_id, part)
            if updated is None:
                return ledger
            conn.execute(
                "INSERT INTO processor_stats (processor_id, ledger) VALUES (?, ?) "
                "ON CONFLICT (processor_id) DO UPDATE SET ledger = excluded.ledger",
                (processor_id, updated.to_json()),
            )
        return updated

    def delete(self, processor_id: str) -> bool:
        """Forget a processor's ledger (the processor was dropped)."""
        with self._db.write() as conn:
            cursor = conn.execute(
                "DELETE FROM processor_stats WHERE processor_id = ?", (processor_id,)
            )
            return cursor.rowcount > 0
