"""qmem's index file, opened and used safely: writable when it can be, read-only when it
cannot, never another program's; every transaction whole or not at all.

Promises:

* **One file**, WAL mode, a busy timeout so that the host bridge and the CLIs can use it at
  once, and ``PRAGMA user_version`` migrations applied in one transaction, in bounded memory
  (a big index shows ``progress(done, total)`` while it is re-indexed or rewritten); another
  process that opens the index meanwhile is told within a second that it "is being upgraded
  by another qmem process", not kept waiting.
* **A file that is not qmem's is never written.**  Ownership is decided on a read-only
  connection before any pragma that writes (:func:`qmem.localdb.schema.check_ownership`); a
  non-SQLite file, a damaged one, someone else's database or one made by a newer qmem raises
  :class:`~qmem.errors.CorruptIndexError` (or :class:`~qmem.errors.LocalIndexError`) saying
  how to recover, and the file is left exactly as it was.  A new file is created mode 0600.
* **A read-only index still opens.**  When the file or its directory cannot be written, the
  connection is read-only (``read_only`` is true; when not even the ``-shm`` file can be made
  and no log holds data, the file is read as immutable), and every write raises
  ``LocalIndexError`` ("… is read-only; nothing was written") before touching the file.
* **A full disk still reads.**  When there is no room for SQLite's 32 KB shared-memory file
  (or for an upgrade), the index opens read-only the same way — as an immutable snapshot when
  the write-ahead log holds nothing, else a clear error — and every write says the disk is
  full.  Each later operation first tries the file again, so a long-lived process (a host's
  bridge) gets its writable index back once there is room.  ``read_only_reason`` says why
  and how the file is read.  An index that opened writable may still have no room for a
  write: :meth:`IndexFile.write_would_fail` finds out by making one, rolled back.
* **Transactions are whole**: ``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on any exception,
  and every SQLite failure comes out as one clear line naming the file, never its path.

:class:`IndexFile` runs no statement against qmem's tables: :class:`qmem.localindex.LocalIndex`
(its subclass) owns them.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path

from ..errors import CorruptIndexError, LocalIndexError
from ..valueclass import dataclass
from .schema import (
    APPLICATION_ID, RECOVERY, SCHEMA_VERSION, check_ownership, has_log_content, migrate, newer_schema_error,
    read_only_uri,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["IndexFile"]


@dataclass(frozen=True)
class ReadOnlyAccess:
    """Why an index was opened read-only, and how it is read."""

    disk_full: bool  # no room for the shared-memory file or an upgrade: may pass
    snapshot: bool  # read as immutable: the file as it was, without locks or its log

    def describe(self) -> str:
        why = "the disk holding it is full" if self.disk_full else "the file or its directory cannot be written"
        return why + ("; reads come from a snapshot of the file" if self.snapshot else "")


class IndexFile:
    """One connection to the index file.  Use as a context manager or call :meth:`close`.

    The connection is used by one thread at a time (a lock serialises callers), and
    several processes may open the same file.  ``progress(done, total)``, if given, is
    called while a migration re-indexes the records (e.g. :class:`qmem.cli.frontend.Progress`).
    """

    def __init__(self, path: Path, *, busy_timeout_ms: int = 5000,
                 progress: Callable[[int, int], None] | None = None) -> None:
        self.path = Path(path)
        self.name = self.path.name
        self._lock = threading.RLock()
        self._busy_timeout_ms = int(busy_timeout_ms)
        self._progress = progress
        self._conn, self._access = _open(self.path, busy_timeout_ms=self._busy_timeout_ms, progress=progress)

    @property
    def read_only(self) -> bool:
        """True when nothing can be written through this connection."""
        return self._access is not None

    @property
    def read_only_reason(self) -> str | None:
        """Why the index is read-only and how it is read (e.g. "the disk holding it is full;
        reads come from a snapshot of the file"), or None when it is writable."""
        return self._access.describe() if self._access is not None else None

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "IndexFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``; rolled back on any exception.

        SQLite errors come out as :class:`LocalIndexError` with a clear message; on a
        read-only index it is raised before anything is attempted.
        """
        with self._lock:
            self._writable_again()
            if self._access is not None:
                raise _disk_full_error(self.name) if self._access.disk_full else _read_only_error(self.name)
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _translate(exc, self.name) from None
            try:
                yield self._conn
            except sqlite3.Error as exc:
                _rollback(self._conn)
                raise _translate(exc, self.name) from None
            except BaseException:
                _rollback(self._conn)
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _rollback(self._conn)
                raise _translate(exc, self.name) from None

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection for reads, with SQLite errors translated."""
        with self._lock:
            self._writable_again()
            try:
                yield self._conn
            except sqlite3.Error as exc:
                raise _translate(exc, self.name) from None

    def _writable_again(self) -> None:
        """An index opened read-only for want of space becomes writable once there is room.

        Only then is the file tried again (one failed open, no I/O beyond it); an immutable
        snapshot is not kept while another process may be writing the file.
        """
        if self._access is None or not self._access.disk_full:
            return
        try:
            conn = _open_writable(self.path, self._busy_timeout_ms, self._progress)
        except sqlite3.Error:
            return
        self._conn.close()
        self._conn, self._access = conn, None

    def write_would_fail(self, write: Callable[[sqlite3.Connection], None]) -> str | None:
        """Why a write would fail now, found by making one: ``write`` runs in a transaction that
        is rolled back, with a page cache so small that its pages go to the write-ahead log as a
        commit's would (they take the room a commit needs, which the next write reuses; nothing
        is committed).  The reason (as :attr:`read_only_reason` words it), or None when the
        write went through, or when the index is busy (for :data:`PROBE_WAIT_MS`: someone is
        writing it) or failed otherwise (the write will say)."""
        with self._lock:
            self._writable_again()
            if self._access is not None:
                return self._access.describe()
            conn = self._conn
            try:
                cache = int(conn.execute("PRAGMA cache_size").fetchone()[0])
            except sqlite3.Error:
                return None
            try:
                conn.execute("PRAGMA cache_size = 1")
                conn.execute(f"PRAGMA busy_timeout = {min(self._busy_timeout_ms, PROBE_WAIT_MS)}")
                conn.execute("BEGIN IMMEDIATE")
                try:
                    write(conn)
                finally:
                    _rollback(conn)
            except sqlite3.Error as exc:
                if _no_room(exc):
                    return "the disk holding it is full; reads work, writes fail"
                if _cannot_write(exc):
                    return "the file or its directory cannot be written"
                return None
            finally:
                try:
                    conn.execute(f"PRAGMA cache_size = {cache}")
                    conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
                except sqlite3.Error:
                    pass
        return None

    def check_integrity(self, limit: int = 5) -> list[str]:
        """SQLite's ``quick_check``: ``["ok"]``, or its first ``limit`` complaints."""
        with self.reading() as conn:
            return [str(row[0]) for row in conn.execute("PRAGMA quick_check").fetchmany(limit)]


def _open(path: Path, *, busy_timeout_ms: int,
          progress: Callable[[int, int], None] | None = None) -> tuple[sqlite3.Connection, ReadOnlyAccess | None]:
    """A connection to the index at ``path``, and why it is read-only (None: writable).

    The connection has ``isolation_level=None`` (transactions are explicit) and rows as
    :class:`sqlite3.Row`; it may be shared between threads by a caller that serialises them.
    """
    name = path.name
    existed = check_ownership(path)  # reads only; raises for a file that is not qmem's
    if not existed:
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise LocalIndexError(
                f"cannot create the directory for the local index {name}: {exc.strerror or 'I/O error'}"
            ) from None
    if existed and not os.access(path, os.W_OK):
        # SQLite would open it read-only without a word, and say so only at the first write.
        return _open_read_only(path, busy_timeout_ms, disk_full=False)
    try:
        conn = _open_writable(path, busy_timeout_ms, progress)
    except sqlite3.Error as exc:
        if existed and _cannot_write(exc):
            return _open_read_only(path, busy_timeout_ms, disk_full=False)
        if existed and _no_room(exc):
            return _open_read_only(path, busy_timeout_ms, disk_full=True)
        raise _translate(exc, name) from None
    if not existed:
        try:
            path.chmod(0o600)
        except OSError:
            pass
    return conn, None


def _translate(exc: sqlite3.Error, name: str) -> LocalIndexError:
    """One clear error for an SQLite failure; the message names the file, not its path."""
    text = str(exc).lower()
    if isinstance(exc, sqlite3.DatabaseError) and ("malformed" in text or "not a database" in text
                                                    or "corrupt" in text):
        return CorruptIndexError(f"the local index {name} is damaged ({exc}); {RECOVERY}")
    if "readonly" in text or "read-only" in text:
        return _read_only_error(name)
    if _no_room(exc):
        return _disk_full_error(name)
    if "locked" in text or "busy" in text:
        return LocalIndexError(f"the local index {name} is busy (another qmem process holds it); try again")
    if "unable to open" in text:
        return LocalIndexError(f"cannot open the local index {name} (check the directory exists and is writable)")
    return LocalIndexError(f"the local index {name} failed: {exc}")


def _read_only_error(name: str) -> LocalIndexError:
    return LocalIndexError(f"the local index {name} is read-only; nothing was written")


def _disk_full_error(name: str) -> LocalIndexError:
    return LocalIndexError(f"the disk holding the local index {name} is full; nothing was written")


def _rollback(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error:
        pass  # no transaction left to roll back: SQLite already did it


def _cannot_write(exc: sqlite3.Error) -> bool:
    """True when SQLite failed because the file or its directory cannot be written."""
    code = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc).lower()
    return (code.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN"))
            or "readonly" in text or "read-only" in text or "unable to open" in text)


def _no_room(exc: sqlite3.Error) -> bool:
    """True when SQLite failed for want of disk space: a write (SQLITE_FULL), or the 32 KB
    shared-memory file that even a reader of a WAL database needs (SQLITE_IOERR_SHMSIZE)."""
    code = getattr(exc, "sqlite_errorname", "") or ""
    return code in ("SQLITE_FULL", "SQLITE_IOERR_SHMSIZE") or "disk is full" in str(exc).lower()


def _connect(target: str, busy_timeout_ms: int, *, uri: bool = False) -> sqlite3.Connection:
    # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE in the index).
    conn = sqlite3.connect(target, uri=uri, timeout=busy_timeout_ms / 1000, isolation_level=None,
                           check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
    return conn


def _marks(conn: sqlite3.Connection) -> tuple[int, int]:
    """The file's ``user_version`` and ``application_id``."""
    return (conn.execute("PRAGMA user_version").fetchone()[0],
            conn.execute("PRAGMA application_id").fetchone()[0])


def _open_writable(path: Path, busy_timeout_ms: int,
                   progress: Callable[[int, int], None] | None) -> sqlite3.Connection:
    conn = _connect(str(path), busy_timeout_ms)
    try:
        version, application_id = _marks(conn)  # the first read: fails here if it cannot write
        if version > SCHEMA_VERSION:
            raise newer_schema_error(path.name, version)
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        if version < SCHEMA_VERSION or application_id != APPLICATION_ID:
            _migrate(conn, path.name, progress, busy_timeout_ms)
    except BaseException:
        conn.close()
        raise
    return conn


#: How long ``status`` waits to probe a write while another process writes: it is writable then.
PROBE_WAIT_MS = 250

#: How long a process waits for the write lock on an index older than its schema: whoever holds
#: it that long is upgrading it (a big index takes a while), and gets on better unasked.
UPGRADE_WAIT_MS = 1000


def _migrate(conn: sqlite3.Connection, name: str, progress: Callable[[int, int], None] | None,
             busy_timeout_ms: int) -> None:
    conn.execute(f"PRAGMA busy_timeout = {min(busy_timeout_ms, UPGRADE_WAIT_MS)}")
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc).lower() or "busy" in str(exc).lower():
            raise LocalIndexError(f"the local index {name} is being upgraded by another qmem process "
                                  f"(to schema v{SCHEMA_VERSION}); try again in a moment") from None
        raise
    finally:
        conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
    try:
        version, application_id = _marks(conn)  # again: another process may have migrated it
        if version > SCHEMA_VERSION:
            raise newer_schema_error(name, version)
        if version < SCHEMA_VERSION or application_id != APPLICATION_ID:
            migrate(conn, version, progress)
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise


def _open_read_only(path: Path, busy_timeout_ms: int, *,
                    disk_full: bool) -> tuple[sqlite3.Connection, ReadOnlyAccess]:
    """A connection that cannot write, for a file this process cannot write (or, with
    ``disk_full``, has no room to write).

    In WAL mode even readers need the ``-shm`` file; when it cannot be created (a
    read-only directory, a full disk) and no log holds data, the file alone is the whole
    database and is read as immutable.  (A live writer would already have made the
    ``-shm`` file, so nobody writes the file while it is read that way.)
    """
    failure: sqlite3.Error | None = None
    for immutable in (False, True):
        if immutable and has_log_content(path):
            break
        try:
            conn = _connect(read_only_uri(path, immutable=immutable), busy_timeout_ms, uri=True)
        except sqlite3.Error as exc:
            failure = exc
            continue
        try:
            version = _marks(conn)[0]
        except sqlite3.Error as exc:
            conn.close()
            failure = exc
            continue
        if version > SCHEMA_VERSION:
            conn.close()
            raise newer_schema_error(path.name, version)
        return conn, ReadOnlyAccess(disk_full=disk_full, snapshot=immutable)
    if failure is not None and not (_cannot_write(failure) or _no_room(failure)):
        raise _translate(failure, path.name)
    if disk_full:
        raise LocalIndexError(
            f"the disk holding the local index {path.name} is full, and its write-ahead log holds changes "
            f"that cannot be read without room for a 32 KB -shm file; free some space and try again")
    raise LocalIndexError(
        f"the local index {path.name} is read-only and cannot be read here: its write-ahead log needs a "
        f"-shm file that cannot be created; open it once with write access (or check its permissions)")
