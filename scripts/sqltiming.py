"""Benchmark instrumentation: the time a LocalIndex spends inside SQLite, and its last query.

``with TimedSQL(index) as timed: index.find(...)`` swaps the index's connection for a
wrapper around the same connection for the duration; ``timed.spent`` adds up execute +
fetch time and ``timed.last_match`` is the last FTS5 MATCH expression bound.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any


class _Rows:
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def fetchall(self) -> list[Any]:
        return self.rows

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None

    def __iter__(self):
        return iter(self.rows)


class TimedSQL:
    def __init__(self, index: Any) -> None:
        self.index = index
        self.conn: sqlite3.Connection = index._conn
        self.spent = 0.0
        self.last_match: str | None = None

    def __enter__(self) -> "TimedSQL":
        self.index._conn = self
        return self

    def __exit__(self, *exc: object) -> None:
        self.index._conn = self.conn

    def execute(self, sql: str, params: Any = ()) -> _Rows:
        started = time.perf_counter()
        rows = self.conn.execute(sql, params).fetchall()
        self.spent += time.perf_counter() - started
        if isinstance(params, dict) and "match" in params:
            self.last_match = params["match"]
        return _Rows(rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)
