"""The SQLite store: connection settings and named, append-only migrations (ARCHITECTURE.md, `store/`).

The store is the source of truth; every other index is derived from it. A KB
written by a newer clawkb (a schema we do not know) is refused, never touched.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from clawkb.errors import SchemaTooNewError, StoreError

DB_NAME = "clawkb.sqlite"

#: (name, SQL). Append only: never edit or reorder an applied migration.
MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_core",
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE documents (
            id INTEGER PRIMARY KEY,
            path TEXT NOT NULL UNIQUE,          -- absolute POSIX path, or a record key
            root TEXT NOT NULL DEFAULT '',      -- the folder it was indexed under
            content_hash TEXT NOT NULL,
            size INTEGER NOT NULL DEFAULT 0,
            mtime_ns INTEGER NOT NULL DEFAULT 0,
            parser TEXT NOT NULL DEFAULT '',
            title TEXT NOT NULL DEFAULT '',
            encoding TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            indexed_at REAL NOT NULL,
            error TEXT                           -- last failure; older content is kept
        );
        CREATE TABLE chunks (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            anchor TEXT NOT NULL UNIQUE,
            ordinal INTEGER NOT NULL,
            text TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            heading_path TEXT NOT NULL DEFAULT '[]',
            line_start INTEGER NOT NULL,
            line_end INTEGER NOT NULL,
            page INTEGER,
            kind TEXT NOT NULL DEFAULT 'text',
            has_code INTEGER NOT NULL DEFAULT 0,
            has_table INTEGER NOT NULL DEFAULT 0,
            language TEXT,
            links TEXT NOT NULL DEFAULT '[]'
        );
        CREATE INDEX chunks_doc ON chunks(doc_id, ordinal);
        CREATE INDEX chunks_hash ON chunks(content_hash);
        -- every chunk insert/delete, in order: derived indexes replay it
        CREATE TABLE changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            op TEXT NOT NULL CHECK (op IN ('add', 'del')),
            chunk_id INTEGER NOT NULL
        );
        CREATE TABLE tombstones (
            path TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            removed_at REAL NOT NULL
        );
        CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            started_at REAL NOT NULL,
            finished_at REAL,
            roots TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'running',
            counts TEXT
        );
        CREATE TABLE journal (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            state TEXT NOT NULL,                 -- started | done | failed | skipped
            reason TEXT,
            at REAL NOT NULL
        );
        CREATE INDEX journal_run ON journal(run_id, state);
        """,
    ),
    (
        "0002_memory",
        """
        -- agent memory: one row per memory; its text is indexed as the document at `path`
        CREATE TABLE memories (
            id TEXT PRIMARY KEY,                 -- hash of namespace + text (dedup key)
            namespace TEXT NOT NULL,
            text TEXT NOT NULL,
            tags TEXT NOT NULL DEFAULT '[]',     -- JSON list of strings
            importance REAL NOT NULL DEFAULT 0.5,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            expires_at REAL,                     -- NULL: never expires
            content_hash TEXT NOT NULL,
            path TEXT NOT NULL UNIQUE            -- memory://<namespace>/<id>
        );
        CREATE INDEX memories_ns ON memories(namespace, updated_at);
        CREATE INDEX memories_expiry ON memories(expires_at);
        """,
    ),
    (
        "0003_hardware",
        """
        -- NULL: not a datasheet; '': a generic datasheet; else the board it describes
        ALTER TABLE documents ADD COLUMN board TEXT;
        CREATE INDEX documents_board ON documents(board);
        CREATE TABLE pin_aliases (
            id INTEGER PRIMARY KEY,
            doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            board TEXT NOT NULL,
            alias TEXT NOT NULL,                 -- normalised: lower case, spaces as _
            pin TEXT NOT NULL,
            extra TEXT NOT NULL DEFAULT '{}',    -- other table columns, header -> value
            line INTEGER NOT NULL,
            heading_path TEXT NOT NULL DEFAULT '[]',
            anchor TEXT                          -- the chunk holding the line
        );
        CREATE INDEX pin_aliases_board ON pin_aliases(board, alias);
        CREATE INDEX pin_aliases_doc ON pin_aliases(doc_id);
        """,
    ),
    (
        "0004_vectors",
        """
        -- dense vectors, keyed by the content hash of the text that was embedded,
        -- so unchanged text is never embedded twice (model = embedder signature key)
        CREATE TABLE vectors (
            model TEXT NOT NULL,
            key TEXT NOT NULL,
            vec BLOB NOT NULL,                   -- float32, little endian
            PRIMARY KEY (model, key)
        ) WITHOUT ROWID;
        -- which vector each chunk uses (rows of deleted chunks are swept by the next run)
        CREATE TABLE chunk_vectors (
            model TEXT NOT NULL,
            chunk_id INTEGER NOT NULL,
            key TEXT NOT NULL,
            PRIMARY KEY (model, chunk_id)
        ) WITHOUT ROWID;
        """,
    ),
    (
        "0005_retired_chunks",
        """
        -- deleted chunks stay readable until no published index generation
        -- that still holds them is in use (snapshot reads; see store/retired.py)
        CREATE TABLE retired_chunks (
            id INTEGER PRIMARY KEY,              -- the chunk id it had
            retired_seq INTEGER NOT NULL,        -- the change seq of its deletion
            root TEXT NOT NULL DEFAULT '',       -- its document's root (path filters)
            doc_id INTEGER NOT NULL,
            path TEXT NOT NULL,
            title TEXT NOT NULL,
            anchor TEXT NOT NULL,
            ordinal INTEGER NOT NULL,
            text TEXT NOT NULL,
            heading_path TEXT NOT NULL,
            line_start INTEGER NOT NULL,
            line_end INTEGER NOT NULL,
            page INTEGER,
            kind TEXT NOT NULL,
            language TEXT,
            metadata TEXT NOT NULL
        );
        CREATE INDEX retired_chunks_seq ON retired_chunks(retired_seq);
        CREATE INDEX retired_chunks_anchor ON retired_chunks(anchor);
        CREATE INDEX retired_chunks_path ON retired_chunks(path);
        """,
    ),
    (
        "0006_knowledge",
        """
        -- trust tier (official | team | community | learned | memory) and domain of a document
        ALTER TABLE documents ADD COLUMN trust TEXT;
        ALTER TABLE documents ADD COLUMN domain TEXT;
        CREATE INDEX documents_domain ON documents(domain);
        -- the note link graph: one row per link found in a document (rewritten with it)
        CREATE TABLE links (
            id INTEGER PRIMARY KEY,
            doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            chunk_id INTEGER,                    -- the chunk holding the link
            kind TEXT NOT NULL,                  -- wiki | markdown | see_also
            target TEXT NOT NULL,                -- as written, normalised (path or note name)
            fragment TEXT NOT NULL DEFAULT '',   -- heading reference after '#'
            text TEXT NOT NULL DEFAULT '',
            line INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX links_doc ON links(doc_id);
        CREATE INDEX links_target ON links(target);
        """,
    ),
    (
        "0007_drop_chunk_hash_index",
        """
        -- no query looks chunks up by content hash, and keeping this index (random
        -- 32-hex keys) up to date was about a third of the cost of storing a chunk
        DROP INDEX IF EXISTS chunks_hash;
        """,
    ),
    (
        "0008_parser_versions",
        """
        -- the parser version and chunker version that produced a document's chunks
        -- (documents.parser has its name). NULL: stored before this migration, so
        -- unknown, and `clawkb index` re-parses the file once
        ALTER TABLE documents ADD COLUMN parser_version TEXT;
        ALTER TABLE documents ADD COLUMN chunker_version TEXT;
        """,
    ),
]

SCHEMA_VERSION = len(MIGRATIONS)


def connect(home: Path, *, create: bool) -> sqlite3.Connection:
    """Open (and if asked, create) the KB database, migrated to this version.

    A file that is there but is not a clawkb store (0 bytes, another format,
    another SQLite database) is an error, never a fresh KB. A store from a
    newer clawkb is refused before anything is written (not even the switch
    to WAL).
    """
    path = home / DB_NAME
    exists = path.exists()
    if not exists and not create:
        raise StoreError(f"no knowledge base at {home} (run `clawkb init` or `clawkb index PATH`)")
    if exists:
        check_store_file(path)
    home.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: cannot open the store ({exc})") from exc
    try:
        conn.execute("PRAGMA busy_timeout=30000")
        if exists:
            refuse_newer(conn, path)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        migrate(conn, path)
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        conn.close()
        raise StoreError(f"{path}: not a usable clawkb database ({exc})") from exc
    except StoreError:
        conn.close()
        raise
    return conn


def undecodable_rows(path: Path) -> list[str]:
    """Store rows whose text is not valid UTF-8 (damage `integrity_check` cannot see)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.text_factory = bytes
    bad: list[str] = []
    queries = {
        "chunks": "SELECT id, text, heading_path, anchor FROM chunks",
        "documents": "SELECT id, path, title, metadata FROM documents",
        "meta": "SELECT rowid, key, value FROM meta",
    }
    try:
        for table, sql in queries.items():
            for row in conn.execute(sql):
                try:
                    for value in row[1:]:
                        if isinstance(value, bytes):
                            value.decode("utf-8")
                except UnicodeDecodeError:
                    bad.append(f"{table} row {row[0]}")
    finally:
        conn.close()
    return bad


def check_store_file(path: Path) -> None:
    """Refuse a store file that is empty or not SQLite at all (one line, names the file).

    The file is read through SQLite only (a read-only connection), never with an
    ``open()`` of our own: closing any other descriptor of a database file drops
    every POSIX lock this process holds on it, which would break the other
    connections of a long-running process (the server's reader threads).
    """
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the store ({exc.strerror or exc})") from exc
    if size == 0:
        raise StoreError(
            f"{path}: the store file is empty (0 bytes); restore a backup with"
            " `clawkb restore BACKUP` or move the file away to start a new knowledge base"
        )
    try:
        probe = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=30.0)
        try:
            probe.execute("PRAGMA schema_version").fetchone()
        finally:
            probe.close()
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            f"{path}: not a clawkb store (not an SQLite database: {exc}); restore a backup"
            " with `clawkb restore BACKUP` or move the file away"
        ) from exc


def refuse_newer(conn: sqlite3.Connection, path: Path) -> None:
    """Read-only checks before any write: a foreign database or a newer schema is refused."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if tables and "migrations" not in tables:
        raise StoreError(
            f"{path}: an SQLite database, but not a clawkb store (no migrations table)"
        )
    if "migrations" in tables:
        names = [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY id")]
        _check_known(names, path)
    if "meta" in tables:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        try:
            version = int(row[0]) if row else 0
        except ValueError:
            raise StoreError(f"{path}: meta.schema_version is not a number ({row[0]!r})") from None
        if version > SCHEMA_VERSION:
            raise SchemaTooNewError(
                f"{path}: written by a newer clawkb (schema version {version}, this clawkb"
                f" knows {SCHEMA_VERSION}); upgrade clawkb to open it"
            )


def _check_known(applied: list[str], path: Path) -> None:
    known = [name for name, _ in MIGRATIONS]
    unknown = [a for a in applied if a not in known]
    if unknown or len(applied) > len(known):
        raise SchemaTooNewError(
            f"{path}: written by a newer clawkb (schema has {', '.join(unknown) or len(applied)});"
            " upgrade clawkb to open it"
        )


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction: ``BEGIN IMMEDIATE``, commit, rollback on any exception.

    Nested use (a transaction already open on ``conn``) becomes a savepoint,
    so an inner failure undoes only the inner part and the outer one decides.
    A long-lived connection is never left inside a transaction.
    """
    if conn.in_transaction:
        name = f"sp_{uuid.uuid4().hex[:12]}"
        conn.execute(f"SAVEPOINT {name}")
        try:
            yield conn
        except BaseException:
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
            raise
        conn.execute(f"RELEASE {name}")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    try:
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def begin_read(conn: sqlite3.Connection) -> None:
    """Open a read transaction held across calls (a pinned snapshot); end it with
    :func:`end_read`. Prefer :func:`read_snapshot` when one block covers it."""
    conn.execute("BEGIN")


def end_read(conn: sqlite3.Connection) -> None:
    """Drop the read transaction opened by :func:`begin_read`, if one is open."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


@contextmanager
def read_snapshot(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A read transaction: every query inside sees one committed state of the store."""
    if conn.in_transaction:
        yield conn
        return
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


def _applied(conn: sqlite3.Connection) -> list[str]:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
        " applied_at REAL NOT NULL)"
    )
    return [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY id")]


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    try:
        applied = _applied(conn)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a usable clawkb database ({exc})") from exc
    _check_known(applied, path)
    for i, (name, sql) in enumerate(MIGRATIONS):
        if i < len(applied):
            if applied[i] != name:
                raise StoreError(f"{path}: migration history differs at {applied[i]!r} vs {name!r}")
            continue
        with transaction(conn):
            for stmt in _statements(sql):
                conn.execute(stmt)
            conn.execute(
                "INSERT INTO migrations (id, name, applied_at) VALUES (?, ?, ?)",
                (i + 1, name, time.time()),
            )
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(i + 1),),
            )


def _statements(sql: str) -> list[str]:
    """Split a migration into statements (our migrations contain no ';' in strings)."""
    lines = [ln.split("--", 1)[0] for ln in sql.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def get_meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))


def store_id(conn: sqlite3.Connection) -> str:
    """This store's identity (created once); derived indexes record it."""
    value = get_meta(conn, "store_id")
    if value is None:
        with transaction(conn):
            value = get_meta(conn, "store_id") or uuid.uuid4().hex
            set_meta(conn, "store_id", value)
    return value
