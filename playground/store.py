"""The run store: runs kept in one SQLite file, so a run outlives its tab and its server, and a
link can name it.

Plain data in, plain data out: a run's bundle (its JSON text) and what a list shows of it (prompt,
status, n); no Gradio and no run record, so the page, a command or a test use it alike.

Why SQLite in one file: no server to run, and transactions. The file is in WAL mode and each run
is written in one transaction, so a process killed in the middle of a write leaves every run
committed before it whole and the one it was writing absent; sessions and processes that write at
once wait their turn (a busy timeout), and a full disk fails the one transaction, not the file.

Who sees what. Each run has an **owner**, a random token its browser keeps to itself: the server
lists a browser's runs by that token and never lists one owner's runs to another. Each run also
has a **key**, 128 random bits: whoever has a run's link (``?run=KEY``) can open it, read-only;
only its owner can delete it.

Limits: at most ``max_runs`` runs and ``max_bytes`` bytes of stored bundles (each compressed).
Saving past them removes the oldest runs, and says how many, so a page can tell its user.

A file that is not a SQLite database, or is one of another program, or is damaged, is refused
with a sentence that names it (``StoreRefused``) before anything is written to it.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from playground.text import fold

APPLICATION_ID = 0x76706C67  # "vplg": what marks a SQLite file as this playground's run store
# 2: each run's origin (a replay, a branch), for the list; 3: its settings in a few words (mode,
# output_kind, seed), so that runs of one prompt can be told apart. An older store gains the columns.
SCHEMA_VERSION = 3
BUSY_TIMEOUT_S = 60.0  # how long a write waits for another: saves run in the background
SCHEMA = """
CREATE TABLE runs (
    key TEXT PRIMARY KEY,         -- what a link carries: 128 random bits, URL-safe
    owner TEXT NOT NULL,          -- the browser that saved it (a random token it keeps)
    request_id TEXT NOT NULL,     -- the run's parent request id (run-...)
    saved_at REAL NOT NULL,       -- seconds since the epoch
    prompt TEXT NOT NULL,         -- for search
    status TEXT NOT NULL,         -- finished | aborted | error | running
    n INTEGER NOT NULL,
    bytes INTEGER NOT NULL,       -- the stored bundle's size, as the limits count it
    bundle BLOB NOT NULL,         -- the run bundle (JSON, playground/bundle.schema.json), zlib-compressed
    origin TEXT NOT NULL DEFAULT '',  -- what the run is beside a sampling ("⟲ replay of run-… at x4"), for the list
    settings TEXT NOT NULL DEFAULT '',  -- "wrapper · DELTA · seed 31", for the list
    UNIQUE (owner, request_id)
);
CREATE INDEX runs_by_owner ON runs (owner, saved_at);
"""
COLUMNS = "key, owner, request_id, saved_at, prompt, status, n, bytes, bundle, origin, settings"  # a whole row


class StoreError(Exception):
    """A sentence for the person: what went wrong with the store, and what to do."""


class StoreRefused(StoreError):
    """The file cannot be this playground's run store (not SQLite, another program's, damaged)."""


class StoreFull(StoreError):
    """The disk or the database is full: the run was not saved."""


@dataclass(frozen=True)
class StoreLimits:
    max_runs: int = 1000
    max_bytes: int = 1024 * 2**20

    def describe(self) -> str:
        return f"{self.max_runs:,} runs and {self.max_bytes / 2**20:,.0f} MB"


@dataclass(frozen=True)
class Entry:
    """One stored run as a list shows it."""

    key: str
    request_id: str
    saved_at: float
    prompt: str
    status: str
    n: int
    bytes: int
    origin: str = ""  # what the run is beside a sampling (a replay, a branch); "" for a sampling
    settings: str = ""  # its mode, output_kind and seed in a few words ("" in a store of version 1 or 2)


@dataclass(frozen=True)
class Saved:
    key: str
    new: bool  # False: this owner had saved this run before (the key is the earlier one's)
    pruned: int  # older runs removed to keep within the limits


def default_path() -> Path:
    """Where the store lives unless told: the user's data directory (XDG)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "vllm-playground" / "runs.sqlite3"


class RunStore:
    """One store file, shared by every session of a process (a lock takes turns); other processes
    may open the same file."""

    def __init__(self, path: str | Path, limits: StoreLimits = StoreLimits()):
        self.path = Path(path).expanduser()
        self.limits = limits
        self._lock = threading.Lock()
        self._db = _open(self.path)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def save(self, owner: str, request_id: str, prompt: str, status: str, n: int, bundle: str,
             origin: str = "", settings: str = "") -> Saved:
        """Keep a run for ``owner`` in one transaction; the same run again is kept once. StoreFull
        when the disk or database is full; StoreError for a run bigger than the store may hold.
        ``origin``: what the list says the run is beside a sampling (a replay, a branch); ``settings``:
        its settings in a few words, for the list."""
        blob = zlib.compress(bundle.encode("utf-8"), 6)
        if len(blob) > self.limits.max_bytes:
            raise StoreError(f"this run takes {len(blob) / 2**20:.1f} MB compressed, more than the "
                             f"{self.limits.max_bytes / 2**20:g} MB the run store may hold: it was not saved")
        with self._lock, _written(self):
            found = self._db.execute("SELECT key FROM runs WHERE owner = ? AND request_id = ?",
                                     (owner, request_id)).fetchone()
            if found:
                return Saved(found[0], False, 0)
            key = secrets.token_urlsafe(16)
            self._db.execute("INSERT INTO runs (key, owner, request_id, saved_at, prompt, status, n, bytes, bundle, "
                             "origin, settings) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (key, owner, request_id, time.time(), prompt, status, n, len(blob), blob, origin,
                              settings))
            return Saved(key, True, self._prune(key))

    def _prune(self, keep: str) -> int:
        """Remove the oldest runs until the store is within its limits (inside the saving transaction)."""
        runs, size = self._db.execute("SELECT count(*), coalesce(sum(bytes), 0) FROM runs").fetchone()
        gone = []
        if runs > self.limits.max_runs or size > self.limits.max_bytes:
            for rowid, key, nbytes in self._db.execute("SELECT rowid, key, bytes FROM runs ORDER BY saved_at, rowid"):
                if runs <= self.limits.max_runs and size <= self.limits.max_bytes:
                    break
                if key != keep:
                    gone.append(rowid)
                    runs, size = runs - 1, size - nbytes
            self._db.executemany("DELETE FROM runs WHERE rowid = ?", [(rowid,) for rowid in gone])
        return len(gone)

    def entries(self, owner: str, search: str = "", limit: int = 200) -> list[Entry]:
        """``owner``'s runs, newest first; ``search``: only those whose prompt holds it (any case, in
        any script: ``text.fold``)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT key, request_id, saved_at, prompt, status, n, bytes, origin, settings FROM runs "
                "WHERE owner = ? AND instr(fold(prompt), ?) > 0 ORDER BY saved_at DESC, rowid DESC LIMIT ?",
                (owner, fold(search), limit)).fetchall()
        return [Entry(*row) for row in rows]

    def count(self, owner: str) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM runs WHERE owner = ?", (owner,)).fetchone()[0]

    def load(self, key: str) -> str | None:
        """The bundle of the run with this key (whoever asks: the key is the permission), or None."""
        with self._lock:
            row = self._db.execute("SELECT bundle FROM runs WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            return zlib.decompress(row[0]).decode("utf-8")
        except (zlib.error, UnicodeDecodeError):
            raise StoreError(f"the run {key} is damaged in the run store ({self.path})") from None

    def key_of(self, owner: str, request_id: str) -> str | None:
        """The key of ``owner``'s copy of a run, if it saved it."""
        with self._lock:
            row = self._db.execute("SELECT key FROM runs WHERE owner = ? AND request_id = ?",
                                   (owner, request_id)).fetchone()
        return row[0] if row else None

    def holds(self, request_id: str) -> bool:
        """Whether any browser's saved runs hold this run (a run a link opened is its owner's)."""
        with self._lock:
            return self._db.execute("SELECT 1 FROM runs WHERE request_id = ? LIMIT 1", (request_id,)).fetchone() \
                is not None

    def delete(self, owner: str, key: str) -> tuple | None:
        """Remove one of ``owner``'s runs; its row (for ``restore``: an Undo), or None when it has
        no run with that key."""
        with self._lock, _written(self):
            row = self._db.execute(f"SELECT {COLUMNS} FROM runs WHERE owner = ? AND key = ?", (owner, key)).fetchone()
            if row is not None:
                self._db.execute("DELETE FROM runs WHERE owner = ? AND key = ?", (owner, key))
            return row

    def restore(self, row: tuple) -> None:
        """Put back a row ``delete`` removed, as it was: its key (so its links work again) and its
        place in the list. Nothing when the run was saved again meanwhile."""
        with self._lock, _written(self):
            self._db.execute(f"INSERT OR IGNORE INTO runs ({COLUMNS}) VALUES ({', '.join('?' * len(row))})", row)

    def totals(self) -> tuple[int, int]:
        """Runs and stored bytes in the whole store."""
        with self._lock:
            return self._db.execute("SELECT count(*), coalesce(sum(bytes), 0) FROM runs").fetchone()


class _written:
    """One write transaction (BEGIN IMMEDIATE: it waits for other writers up front), committed at
    the end or rolled back, with SQLite's errors as sentences."""

    def __init__(self, store: RunStore):
        self.store = store

    def __enter__(self):
        try:
            self.store._db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise _error(self.store.path, e) from None

    def __exit__(self, kind, error, _traceback) -> bool:
        db = self.store._db
        if kind is None:
            try:
                db.execute("COMMIT")
                return False
            except sqlite3.Error as e:
                error = e
        if db.in_transaction:
            db.execute("ROLLBACK")
        if isinstance(error, sqlite3.Error):
            raise _error(self.store.path, error) from None
        return False


def _error(path: Path, e: sqlite3.Error) -> StoreError:
    if getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "full" in str(e):
        return StoreFull(f"the run store is full ({path}: {e}): this run was not saved. Free some disk space, "
                         "or delete runs in History")
    return StoreError(f"the run store ({path}) failed: {e}")


def _open(path: Path) -> sqlite3.Connection:
    """Open (or make) the store at ``path``; StoreRefused, naming the file, for one that is not ours."""
    if path.is_dir():
        raise StoreRefused(f"{path} is a folder, not a run store file")
    if path.exists() and not path.is_file():  # a device or a pipe: SQLite would leave its journal beside it
        raise StoreRefused(f"{path} is not a regular file, so it cannot be a run store")
    if file := next((folder for folder in path.parents if folder.is_file()), None):
        raise StoreRefused(f"{file} is a file, not a folder to keep {path.name} in")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))  # readable by its user only
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    db.create_function("fold", 1, fold, deterministic=True)  # History's search: any case, in any script
    try:
        _check(db, path)
    except BaseException:
        db.close()
        raise
    return db


def _check(db: sqlite3.Connection, path: Path) -> None:
    try:  # one read transaction: another process may be making the store between two reads
        db.execute("BEGIN")
        application_id = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = sorted(row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        db.execute("COMMIT")
    except sqlite3.DatabaseError as e:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise _refused(path, e, f"{path} is not a run store: it is not a SQLite database ({e})") from None
    if application_id != APPLICATION_ID and (tables or application_id):
        raise StoreRefused(f"{path} is a SQLite database of another program (tables: {', '.join(tables) or 'none'}), "
                           "not this playground's run store")
    if version > SCHEMA_VERSION:
        raise StoreRefused(f"{path} was made by a newer playground (store version {version}; this one reads "
                           f"{SCHEMA_VERSION})")
    try:
        problems = [row[0] for row in db.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise StoreRefused(f"{path} is damaged: {'; '.join(problems[:3])}")
        if _write_ahead_log(db) != "wal":
            raise StoreRefused(f"{path} cannot be written safely: SQLite refused its write-ahead log")
        db.execute("PRAGMA synchronous = FULL")
        db.execute("BEGIN IMMEDIATE")  # two processes that make a new store at once: one makes it
        # A write, to know now rather than at the first run's save: SQLite opens a file it may not write
        # (read-only, immutable) for reading without a word.
        db.execute(f"PRAGMA user_version = {db.execute('PRAGMA user_version').fetchone()[0]}")
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'runs'").fetchone():
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        elif (found := db.execute("PRAGMA user_version").fetchone()[0]) < SCHEMA_VERSION:  # an older store:
            if found < 2:  # what its runs were (a replay, a branch) and their settings, unknown
                db.execute("ALTER TABLE runs ADD COLUMN origin TEXT NOT NULL DEFAULT ''")
            db.execute("ALTER TABLE runs ADD COLUMN settings TEXT NOT NULL DEFAULT ''")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    except sqlite3.DatabaseError as e:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise _refused(path, e, f"{path} is damaged: {e}") from None


def _refused(path: Path, e: sqlite3.DatabaseError, otherwise: str) -> StoreRefused:
    """Why SQLite could not use the file, in the words of what to do about it (``otherwise``: what
    any other failure means where it happened)."""
    code = (getattr(e, "sqlite_errorcode", None) or 0) & 0xFF  # the primary code of an extended one
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return StoreRefused(f"{path} is held by another program for more than {BUSY_TIMEOUT_S:g} s ({e})")
    if code == sqlite3.SQLITE_READONLY:
        return StoreRefused(f"{path} cannot be written ({e}): the file, or its folder, is read-only")
    if code == sqlite3.SQLITE_CANTOPEN:
        return StoreRefused(f"{path} cannot be opened ({e}): SQLite keeps two files beside a run store "
                            f"({path.name}-wal and {path.name}-shm), so it must be a file in a folder this user "
                            "can write")
    if code == sqlite3.SQLITE_IOERR:
        return StoreRefused(f"{path} cannot be read and written as a file ({e})")
    return StoreRefused(otherwise)


def _write_ahead_log(db: sqlite3.Connection) -> str:
    """Switch a store to its write-ahead log (kept in the file, so once per store). SQLite answers busy at once,
    without waiting, while another connection reads the file, as when several processes open a new store together:
    so wait here, as long as any write would."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            return db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as e:
            if getattr(e, "sqlite_errorcode", None) != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.005)
