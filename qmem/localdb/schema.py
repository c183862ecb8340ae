"""Which SQLite files are qmem's index, and how an index is brought to the current schema.

Promises:

* **qmem's files carry qmem's mark.**  Every index has ``PRAGMA application_id`` =
  :data:`APPLICATION_ID` (``0x716D656D``, the ASCII bytes ``qmem``), set when it is created
  and, for an index made before the mark existed (application_id 0, ``user_version`` 1 or 2
  and exactly the tables, indexes and triggers qmem created), when it is migrated.
* **Another program's file is never touched.**  :func:`check_ownership` decides from the
  file's header and, when needed, a read-only connection that writes nothing (not even a
  ``-wal`` or ``-shm`` beside the file unless that file already has a write-ahead log with
  content).  Anything that is not qmem's — another application's id, a database with
  other tables, a ``user_version`` qmem never wrote — is refused before any pragma that
  writes, and the file stays byte for byte as it was.
* **Migrations** run in the caller's transaction: all of them or none.  v3 switches the
  full-text table to Porter stemming and rebuilds it, reporting ``progress(done, total)``;
  v4 rewrites every compared time (``created_at``, ``expires_at``, ``deleted_at``) that is
  not yet in qmem's one form (:func:`qmem.records.format_utc`), reporting progress too.
"""

from __future__ import annotations

import os
import sqlite3
from functools import lru_cache
from pathlib import Path
from urllib.parse import quote

from ..errors import CorruptIndexError, LocalIndexError
from ..records import canonical_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = []

SCHEMA_VERSION = 4

#: ``PRAGMA application_id`` of every qmem index: the four ASCII bytes "qmem".
APPLICATION_ID = int.from_bytes(b"qmem", "big")

#: How the full-text table splits text into words: Porter stems of Unicode words, accents
#: removed.  The query side (:mod:`qmem.localdb.lexical`) relies on FTS5 applying the same rules.
FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"

#: Records indexed per step of the v3 rebuild, between two progress calls.
REBUILD_BATCH = 5000

_STEMMED = 3  # the version whose migration creates the stemmed full-text table, left for _fill_fts
_ONE_TIME_FORM = 4  # the version whose times are all in one form, rewritten by _normalise_times

#: The form every compared time is stored in (``2027-01-31T00:00:00.000000Z``), as a GLOB.
_CANONICAL_TIME_GLOB = ("[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]."
                        "[0-9][0-9][0-9][0-9][0-9][0-9]Z")
_TIME_COLUMNS = ("created_at", "expires_at", "deleted_at")

_SQLITE_MAGIC = b"SQLite format 3\x00"

RECOVERY = (
    "move it aside (qmem leaves it untouched) and run `python3 -m qmem.local import` to rebuild "
    "the index from session files; records still queued live only in that file, so keep it "
    "and try `sqlite3 qmem.sqlite .recover` on a copy"
)

_FTS_TRIGGERS = """
    CREATE TRIGGER records_fts_insert AFTER INSERT ON records BEGIN
        INSERT INTO records_fts (rowid, text) VALUES (new.rowid, new.text);
    END;
    CREATE TRIGGER records_fts_delete AFTER DELETE ON records BEGIN
        INSERT INTO records_fts (records_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
    END;
    CREATE TRIGGER records_fts_update AFTER UPDATE OF text ON records BEGIN
        INSERT INTO records_fts (records_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
        INSERT INTO records_fts (rowid, text) VALUES (new.rowid, new.text);
    END;
"""

MIGRATIONS: tuple[str, ...] = (
    # v1
    """
    CREATE TABLE records (
        rowid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        local_id TEXT UNIQUE,
        text TEXT NOT NULL,
        kind TEXT,
        project_id TEXT,
        scope TEXT,
        agent_id TEXT,
        source TEXT,
        created_at TEXT,
        expires_at TEXT,
        supersedes_id TEXT,
        supersede_reason TEXT,
        superseded_by TEXT,
        private INTEGER NOT NULL DEFAULT 0 CHECK (private IN (0, 1)),
        deleted_at TEXT,
        state TEXT NOT NULL CHECK (state IN ('pending', 'synced', 'observed', 'failed', 'duplicate')),
        reason TEXT,
        duplicate_of TEXT,
        coverage TEXT NOT NULL CHECK (coverage IN ('full', 'partial')),
        machine TEXT,
        session_file TEXT,
        tool TEXT,
        content_hash TEXT NOT NULL,
        learned_at TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        claim_token TEXT,
        claim_until REAL
    );
    CREATE INDEX records_content_hash ON records (content_hash);
    CREATE INDEX records_queue ON records (state, rowid) WHERE local_id IS NOT NULL;
    CREATE INDEX records_supersedes ON records (supersedes_id) WHERE supersedes_id IS NOT NULL;
    CREATE VIRTUAL TABLE records_fts USING fts5 (
        text, content = 'records', content_rowid = 'rowid',
        tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3'
    );
    """ + _FTS_TRIGGERS + """
    CREATE TABLE import_files (
        key TEXT PRIMARY KEY,
        size INTEGER NOT NULL,
        mtime_ns INTEGER NOT NULL,
        inode INTEGER NOT NULL,
        offset INTEGER NOT NULL,
        head TEXT NOT NULL
    );
    CREATE TABLE import_calls (
        file_key TEXT NOT NULL,
        call_id TEXT NOT NULL,
        name TEXT NOT NULL,
        arguments TEXT NOT NULL,
        PRIMARY KEY (file_key, call_id)
    );
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """,
    # v2: a synced outbox record's local id is remapped in superseded_by too; without this
    # index every sync scanned the whole table.
    """
    CREATE INDEX records_superseded_by ON records (superseded_by) WHERE superseded_by IS NOT NULL;
    """,
    # v3: Porter stems ("visited" finds "visit").  The prefix indexes go: find tries
    # prefixes only when no record has any of the words, and then reads the term index.
    # The table is filled by migrate(), batch by batch, so that progress can be shown.
    # import_files.tail: a digest of the bytes before the saved offset (session import
    # uses it to notice a file rewritten in place).
    """
    DROP TRIGGER records_fts_insert;
    DROP TRIGGER records_fts_delete;
    DROP TRIGGER records_fts_update;
    DROP TABLE records_fts;
    CREATE VIRTUAL TABLE records_fts USING fts5 (
        text, content = 'records', content_rowid = 'rowid', tokenize = '""" + FTS_TOKENIZE + """'
    );
    """ + _FTS_TRIGGERS + """
    ALTER TABLE import_files ADD COLUMN tail TEXT NOT NULL DEFAULT '';
    """,
    # v4: times in one form.  SQLite's julianday() reads no lower-case "t", so an expiry
    # written "2027-01-31t00:00:00z" never expired; migrate() rewrites such rows.  No schema change.
    "",
)


def _statements(script: str) -> list[str]:
    # sqlite3.executescript() would COMMIT first; split into statements instead.
    statements, statement = [], ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            statements.append(statement)
            statement = ""
    if statement.strip():
        raise sqlite3.ProgrammingError("incomplete statement in migration")
    return statements


def migrate(conn: sqlite3.Connection, version: int,
            progress: Callable[[int, int], None] | None = None) -> None:
    """Bring an index at ``version`` to :data:`SCHEMA_VERSION` and mark it as qmem's.

    Runs inside the caller's open transaction (nothing here commits).
    """
    for number in range(version, SCHEMA_VERSION):
        for statement in _statements(MIGRATIONS[number]):
            conn.execute(statement)
        if number + 1 == _STEMMED:
            _fill_fts(conn, progress)
        if number + 1 == _ONE_TIME_FORM:
            _normalise_times(conn, progress)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _fill_fts(conn: sqlite3.Connection, progress: Callable[[int, int], None] | None) -> None:
    total = conn.execute("SELECT count(*) FROM records").fetchone()[0]
    if not total:
        return
    done, last = 0, 0
    if progress is not None:
        progress(0, total)
    while True:
        high, count = conn.execute(
            "SELECT max(rowid), count(*) FROM (SELECT rowid FROM records WHERE rowid > ? ORDER BY rowid LIMIT ?)",
            (last, REBUILD_BATCH)).fetchone()
        if not count:
            break
        # The same work as FTS5's 'rebuild', in steps that can be reported.
        conn.execute("INSERT INTO records_fts (rowid, text) SELECT rowid, text FROM records "
                     "WHERE rowid > ? AND rowid <= ?", (last, high))
        done, last = done + count, high
        if progress is not None:
            progress(done, total)


def _normalise_times(conn: sqlite3.Connection, progress: Callable[[int, int], None] | None) -> None:
    """Rewrite each row's compared times that are RFC 3339 but not in qmem's one form.

    A value that is no time at all is left as it is (it never counts as past).  Only the
    rows that need it are read and written; the text is not touched, so the full-text
    index is not either.  The table is walked in rowid windows of :data:`REBUILD_BATCH`
    rows, so memory stays bounded however big the index is.
    """
    outside = " OR ".join(f"({column} IS NOT NULL AND {column} NOT GLOB :form)" for column in _TIME_COLUMNS)
    form = {"form": _CANONICAL_TIME_GLOB}
    total = conn.execute(f"SELECT count(*) FROM records WHERE {outside}", form).fetchone()[0]
    if not total:
        return
    if progress is not None:
        progress(0, total)
    assignments = ", ".join(f"{column} = ?" for column in _TIME_COLUMNS)
    done, last = 0, 0
    while done < total:
        high = conn.execute("SELECT max(rowid) FROM (SELECT rowid FROM records WHERE rowid > ? ORDER BY rowid "
                            "LIMIT ?)", (last, REBUILD_BATCH)).fetchone()[0]
        if high is None:
            break
        batch = conn.execute(f"SELECT rowid, {', '.join(_TIME_COLUMNS)} FROM records "
                             f"WHERE rowid > :low AND rowid <= :high AND ({outside})",
                             {**form, "low": last, "high": high}).fetchall()
        conn.executemany(f"UPDATE records SET {assignments} WHERE rowid = ?",
                         [(*(_one_form(value) for value in row[1:]), row[0]) for row in batch])
        done, last = done + len(batch), high
        if progress is not None and batch:
            progress(done, total)


def _one_form(value: str | None) -> str | None:
    return None if value is None else canonical_time(value) or value


@lru_cache(maxsize=None)
def _legacy_schema(version: int) -> frozenset[tuple[str, str]]:
    """The schema objects of a qmem index at ``version``, as made by its migrations."""
    conn = sqlite3.connect(":memory:")
    try:
        for script in MIGRATIONS[:version]:
            for statement in _statements(script):
                conn.execute(statement)
        return _schema_objects(conn)
    finally:
        conn.close()


def _schema_objects(conn: sqlite3.Connection) -> frozenset[tuple[str, str]]:
    """(type, name) of every table, index, view and trigger, SQLite's own excepted."""
    return frozenset((row[0], row[1]) for row in conn.execute(
        "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"))


def read_only_uri(path: Path, *, immutable: bool = False) -> str:
    """An SQLite URI that opens ``path`` read-only (``immutable``: without locks or WAL files)."""
    return f"file:{quote(str(path.absolute()))}?mode=ro" + ("&immutable=1" if immutable else "")


def has_log_content(path: Path) -> bool:
    """True if a write-ahead log or rollback journal with content lies beside ``path``."""
    for suffix in ("-wal", "-journal"):
        try:
            if os.stat(f"{path}{suffix}").st_size > 0:
                return True
        except OSError:
            pass
    return False


def check_ownership(path: Path) -> bool:
    """Whether ``path`` holds data (False: missing or empty, so qmem may create it).

    Raises CorruptIndexError for anything that is not a qmem index (left untouched) and
    LocalIndexError when the file cannot be read.  Never writes.
    """
    name = path.name
    try:
        with open(path, "rb") as handle:
            header = handle.read(100)
    except FileNotFoundError:
        return False
    except IsADirectoryError:
        raise LocalIndexError(f"the local index path {name} is a directory") from None
    except OSError as exc:
        raise LocalIndexError(f"cannot read the local index {name}: {exc.strerror or 'I/O error'}") from None
    if not header:
        return False
    if not header.startswith(_SQLITE_MAGIC) or len(header) < 100:
        raise CorruptIndexError(f"the local index {name} is not an SQLite database; {RECOVERY}")
    if int.from_bytes(header[68:72], "big") == APPLICATION_ID:
        version = int.from_bytes(header[60:64], "big")
        if version > SCHEMA_VERSION:
            raise newer_schema_error(name, version)
        return True  # the mark is only ever written by qmem, and never removed
    application_id, version, objects = _probe(path)
    if application_id == APPLICATION_ID:
        if version > SCHEMA_VERSION:
            raise newer_schema_error(name, version)
        return True  # marked in a write-ahead log not yet copied into the file
    if application_id == 0 and version == 0 and not objects:
        return True  # an empty database: nothing of anyone's to lose
    if application_id == 0 and version in (1, 2) and objects == _legacy_schema(version):
        return True  # made by qmem before the mark existed; marked when migrated
    what = (f"the database of another application (application_id {application_id:#010x})" if application_id
            else "an SQLite database that qmem did not create")
    raise CorruptIndexError(
        f"the local index {name} is {what}; it was left untouched — point QMEM_SQLITE or localDbPath "
        f"at another file")


def newer_schema_error(name: str, version: int) -> LocalIndexError:
    return LocalIndexError(
        f"the local index {name} was made by a newer qmem (schema v{version}; this qmem "
        f"knows v{SCHEMA_VERSION}); upgrade qmem or point QMEM_SQLITE at another file")


def _probe(path: Path) -> tuple[int, int, frozenset[tuple[str, str]]]:
    """application_id, user_version and schema objects, read without writing anything.

    A file with no log content is read as immutable, so that SQLite creates no ``-wal``
    or ``-shm`` beside someone else's database; otherwise the log must be read too.
    """
    immutable = not has_log_content(path)
    try:
        conn = sqlite3.connect(read_only_uri(path, immutable=immutable), uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise _probe_error(path.name, exc) from None
    try:
        application_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        return application_id, version, _schema_objects(conn)
    except sqlite3.Error as exc:
        raise _probe_error(path.name, exc) from None
    finally:
        conn.close()


def _probe_error(name: str, exc: sqlite3.Error) -> LocalIndexError:
    text = str(exc).lower()
    if "malformed" in text or "not a database" in text or "corrupt" in text:
        return CorruptIndexError(f"the local index {name} is damaged ({exc}); {RECOVERY}")
    return LocalIndexError(f"cannot read the local index {name} ({exc}); it was left untouched")
