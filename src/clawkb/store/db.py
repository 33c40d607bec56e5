"""The SQLite store: connection settings and named, append-only migrations (DESIGN D1).

The store is the source of truth; every other index is derived from it. A KB
written by a newer clawkb (a schema we do not know) is refused, never touched.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

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
        "0005_knowledge",
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
]

SCHEMA_VERSION = len(MIGRATIONS)


def connect(home: Path, *, create: bool) -> sqlite3.Connection:
    """Open (and if asked, create) the KB database, migrated to this version."""
    path = home / DB_NAME
    if not path.exists() and not create:
        raise StoreError(f"no knowledge base at {home} (run `clawkb init` or `clawkb index PATH`)")
    home.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=30000")
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a usable clawkb database ({exc})") from exc
    migrate(conn, path)
    return conn


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
    known = [name for name, _ in MIGRATIONS]
    unknown = [a for a in applied if a not in known]
    if unknown or len(applied) > len(known):
        raise SchemaTooNewError(
            f"{path}: written by a newer clawkb (schema has {', '.join(unknown) or len(applied)});"
            " upgrade clawkb to open it"
        )
    for i, (name, sql) in enumerate(MIGRATIONS):
        if i < len(applied):
            if applied[i] != name:
                raise StoreError(f"{path}: migration history differs at {applied[i]!r} vs {name!r}")
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
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
            conn.execute("COMMIT")
        except Exception:
            conn.execute("ROLLBACK")
            raise


def _statements(sql: str) -> list[str]:
    """Split a migration into statements (our migrations contain no ';' in strings)."""
    lines = [ln.split("--", 1)[0] for ln in sql.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def get_meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))
