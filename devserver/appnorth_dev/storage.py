"""Storage: one SQLite connection guarded by a re-entrant lock."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from typing import Any, Iterator

from .protocol import now_ms
from .jsonutil import canonical_json
from .validation import make_id, parse_id


SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    app TEXT NOT NULL, email TEXT NOT NULL, token TEXT NOT NULL,
    PRIMARY KEY (app, email));
CREATE TABLE IF NOT EXISTS boards (
    id INTEGER PRIMARY KEY AUTOINCREMENT, app TEXT NOT NULL,
    name TEXT NOT NULL, description TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ideas (
    id INTEGER PRIMARY KEY AUTOINCREMENT, app TEXT NOT NULL, board_id INTEGER NOT NULL,
    title TEXT NOT NULL, body TEXT NOT NULL, status TEXT NOT NULL,
    votes INTEGER NOT NULL DEFAULT 0, comment_count INTEGER NOT NULL DEFAULT 0,
    author TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS ideas_app ON ideas (app, board_id);
CREATE TABLE IF NOT EXISTS comments (
    id INTEGER PRIMARY KEY AUTOINCREMENT, app TEXT NOT NULL, idea_id INTEGER NOT NULL,
    body TEXT NOT NULL, author TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS feedback (
    id INTEGER PRIMARY KEY AUTOINCREMENT, app TEXT NOT NULL, text TEXT NOT NULL,
    diagnostics TEXT NOT NULL, author TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS screenshots (
    id INTEGER PRIMARY KEY AUTOINCREMENT, feedback_id INTEGER NOT NULL,
    content_type TEXT NOT NULL, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS votes (
    app TEXT NOT NULL, idea_id INTEGER NOT NULL, identity TEXT NOT NULL,
    created_at INTEGER NOT NULL, PRIMARY KEY (app, idea_id, identity));
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, app TEXT NOT NULL, body TEXT NOT NULL,
    author TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, app TEXT NOT NULL, event_id TEXT NOT NULL,
    name TEXT NOT NULL, timestamp INTEGER NOT NULL, properties_raw TEXT,
    anonymous_id TEXT NOT NULL, user_id TEXT, session_id TEXT,
    identity TEXT NOT NULL, received_at INTEGER NOT NULL,
    UNIQUE (app, event_id));
CREATE TABLE IF NOT EXISTS configs (
    app TEXT NOT NULL, version INTEGER NOT NULL, document TEXT NOT NULL,
    is_raw INTEGER NOT NULL, created_at INTEGER NOT NULL,
    PRIMARY KEY (app, version));
CREATE TABLE IF NOT EXISTS idempotency (
    app TEXT NOT NULL, identity TEXT NOT NULL, key TEXT NOT NULL,
    method TEXT NOT NULL, path TEXT NOT NULL, body_sha256 TEXT NOT NULL,
    status INTEGER NOT NULL, response TEXT NOT NULL, created_at INTEGER NOT NULL,
    PRIMARY KEY (app, identity, key));
"""

DATA_TABLES = ("users", "boards", "ideas", "comments", "feedback", "screenshots",
               "votes", "messages", "events", "configs", "idempotency")


class AlreadyVoted(Exception):
    pass


def _fold(value: Any) -> Any:
    return value.casefold() if isinstance(value, str) else value


class Storage:
    """All persistent state. One connection shared by every thread: SQLite
    serialises writers anyway, and a single RLock keeps transactions simple
    (they nest, so the idempotency layer can wrap a write in its own)."""

    def __init__(self, path: str | None):
        self.path = path or ":memory:"
        self.lock = threading.RLock()
        self._depth = 0
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        # Unicode-aware case folding for ?q= (SQLite's lower() is ASCII only).
        self._db.create_function("fold", 1, _fold, deterministic=True)
        self._db.execute("PRAGMA busy_timeout = 5000")
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        with self.lock:
            self._db.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self.lock:
            outer = self._depth == 0
            if outer:
                self._db.execute("BEGIN IMMEDIATE")
            self._depth += 1
            try:
                yield self._db
            except BaseException:
                self._depth -= 1
                if outer:
                    self._db.execute("ROLLBACK")
                raise
            self._depth -= 1
            if outer:
                self._db.execute("COMMIT")

    def _all(self, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
        with self.lock:
            return self._db.execute(sql, args).fetchall()

    def _one(self, sql: str, args: tuple = ()) -> sqlite3.Row | None:
        with self.lock:
            return self._db.execute(sql, args).fetchone()

    # -- admin ------------------------------------------------------------

    def reset(self) -> None:
        # Rows only: AUTOINCREMENT keeps ids unique for the file's lifetime,
        # so a client cache from before the reset cannot alias new rows.
        with self.transaction() as db:
            for table in DATA_TABLES:
                db.execute(f"DELETE FROM {table}")

    def register_user(self, app: str, email: str, token: str) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO users (app, email, token) VALUES (?, ?, ?)",
                       (app, email, token))

    def credential_valid(self, app: str, email: str, token: str) -> bool:
        row = self._one("SELECT token FROM users WHERE app = ? AND email = ?", (app, email))
        return row is not None and row["token"] == token

    def seed_demo(self) -> bool:
        """Demo boards and ideas for app 'demo', unless it already has boards."""
        with self.transaction():
            if self.list_boards("demo"):
                return False
            features = self.create_board("demo", "Features", "Ideas for new features")
            bugs = self.create_board("demo", "Bugs", "Things that are broken")
            fid, bid = parse_id("b", features["id"]), parse_id("b", bugs["id"])
            self.create_idea("demo", fid, "Dark mode",
                             "A dark theme for night-time reading.", "planned", "admin")
            self.create_idea("demo", fid, "Offline sync",
                             "Queue changes while offline and sync them later.", "in_progress", "admin")
            self.create_idea("demo", fid, "Faster search",
                             "Search results should appear as you type.", "open", "admin")
            self.create_idea("demo", bid, "Crash on login",
                             "The app crashes when the password contains an emoji.", "done", "admin")
            return True

    # -- boards and ideas -------------------------------------------------

    @staticmethod
    def _board(row: sqlite3.Row) -> dict:
        return {"id": make_id("b", row["id"]), "name": row["name"],
                "description": row["description"], "created_at": row["created_at"]}

    @staticmethod
    def _idea(row: sqlite3.Row) -> dict:
        return {"id": make_id("i", row["id"]), "board_id": make_id("b", row["board_id"]),
                "title": row["title"], "body": row["body"], "status": row["status"],
                "votes": row["votes"], "comment_count": row["comment_count"],
                "author": row["author"], "created_at": row["created_at"]}

    def create_board(self, app: str, name: str, description: str) -> dict:
        with self.transaction() as db:
            cur = db.execute("INSERT INTO boards (app, name, description, created_at) VALUES (?, ?, ?, ?)",
                             (app, name, description, now_ms()))
            return self._board(db.execute("SELECT * FROM boards WHERE id = ?", (cur.lastrowid,)).fetchone())

    def list_boards(self, app: str) -> list[dict]:
        return [self._board(r) for r in self._all("SELECT * FROM boards WHERE app = ? ORDER BY id", (app,))]

    def board_exists(self, app: str, board_id: int | None) -> bool:
        return board_id is not None and self._one(
            "SELECT 1 FROM boards WHERE app = ? AND id = ?", (app, board_id)) is not None

    def create_idea(self, app: str, board_id: int, title: str, body: str, status: str, author: str) -> dict:
        with self.transaction() as db:
            cur = db.execute(
                "INSERT INTO ideas (app, board_id, title, body, status, author, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)", (app, board_id, title, body, status, author, now_ms()))
            return self.get_idea(app, cur.lastrowid)

    def get_idea(self, app: str, idea_id: int | None) -> dict | None:
        if idea_id is None:
            return None
        row = self._one("SELECT * FROM ideas WHERE app = ? AND id = ?", (app, idea_id))
        return self._idea(row) if row else None

    def list_ideas(self, app: str, board_id: int | None, q: str | None, status: str | None,
                   after: int, limit: int) -> tuple[list[dict], int | None]:
        """One page in creation order; returns (ideas, last row id if more follow)."""
        sql = ["SELECT * FROM ideas WHERE app = ? AND id > ?"]
        args: list[Any] = [app, after]
        if board_id is not None:
            sql.append("AND board_id = ?")
            args.append(board_id)
        if status is not None:
            sql.append("AND status = ?")
            args.append(status)
        if q:
            sql.append("AND (instr(fold(title), ?) > 0 OR instr(fold(body), ?) > 0)")
            args += [q.casefold(), q.casefold()]
        sql.append("ORDER BY id LIMIT ?")
        args.append(limit + 1)
        rows = self._all(" ".join(sql), tuple(args))
        more = len(rows) > limit
        rows = rows[:limit]
        return [self._idea(r) for r in rows], (rows[-1]["id"] if more else None)

    # -- comments, votes, feedback, chat ----------------------------------

    @staticmethod
    def _comment(row: sqlite3.Row) -> dict:
        return {"id": make_id("c", row["id"]), "idea_id": make_id("i", row["idea_id"]),
                "body": row["body"], "author": row["author"], "created_at": row["created_at"]}

    def add_comment(self, app: str, idea_id: int, body: str, author: str) -> dict:
        with self.transaction() as db:
            cur = db.execute("INSERT INTO comments (app, idea_id, body, author, created_at)"
                             " VALUES (?, ?, ?, ?, ?)", (app, idea_id, body, author, now_ms()))
            db.execute("UPDATE ideas SET comment_count = comment_count + 1 WHERE id = ?", (idea_id,))
            return self._comment(db.execute("SELECT * FROM comments WHERE id = ?", (cur.lastrowid,)).fetchone())

    def delete_idea(self, app: str, idea_id: int) -> bool:
        """Removes an idea with its comments and votes (for tests of
        writes queued against an idea that is gone)."""
        with self.transaction() as db:
            deleted = db.execute("DELETE FROM ideas WHERE app = ? AND id = ?", (app, idea_id)).rowcount
            db.execute("DELETE FROM comments WHERE app = ? AND idea_id = ?", (app, idea_id))
            db.execute("DELETE FROM votes WHERE app = ? AND idea_id = ?", (app, idea_id))
            return deleted > 0

    def list_comments(self, app: str, idea_id: int) -> list[dict]:
        return [self._comment(r) for r in self._all(
            "SELECT * FROM comments WHERE app = ? AND idea_id = ? ORDER BY id", (app, idea_id))]

    def add_vote(self, app: str, idea_id: int, identity: str) -> int:
        with self.transaction() as db:
            try:
                db.execute("INSERT INTO votes (app, idea_id, identity, created_at) VALUES (?, ?, ?, ?)",
                           (app, idea_id, identity, now_ms()))
            except sqlite3.IntegrityError:
                raise AlreadyVoted() from None
            db.execute("UPDATE ideas SET votes = votes + 1 WHERE id = ?", (idea_id,))
            return db.execute("SELECT votes FROM ideas WHERE id = ?", (idea_id,)).fetchone()["votes"]

    def add_feedback(self, app: str, text: str, diagnostics: dict,
                     screenshots: list[tuple[str, bytes]], author: str) -> dict:
        created = now_ms()
        with self.transaction() as db:
            cur = db.execute("INSERT INTO feedback (app, text, diagnostics, author, created_at)"
                             " VALUES (?, ?, ?, ?, ?)",
                             (app, text, canonical_json(diagnostics), author, created))
            for content_type, data in screenshots:
                db.execute("INSERT INTO screenshots (feedback_id, content_type, data) VALUES (?, ?, ?)",
                           (cur.lastrowid, content_type, data))
            return {"id": make_id("f", cur.lastrowid), "text": text, "diagnostics": diagnostics,
                    "screenshot_count": len(screenshots), "author": author, "created_at": created}

    @staticmethod
    def _message(row: sqlite3.Row) -> dict:
        return {"id": make_id("m", row["id"]), "body": row["body"],
                "author": row["author"], "created_at": row["created_at"]}

    def add_message(self, app: str, body: str, author: str) -> dict:
        with self.transaction() as db:
            cur = db.execute("INSERT INTO messages (app, body, author, created_at) VALUES (?, ?, ?, ?)",
                             (app, body, author, now_ms()))
            return self._message(db.execute("SELECT * FROM messages WHERE id = ?", (cur.lastrowid,)).fetchone())

    def list_messages(self, app: str, author: str) -> list[dict]:
        return [self._message(r) for r in self._all(
            "SELECT * FROM messages WHERE app = ? AND author = ? ORDER BY id", (app, author))]

    # -- events -----------------------------------------------------------

    def insert_events(self, app: str, identity: str, events: list[dict]) -> tuple[int, int]:
        """Insert a validated batch; returns (newly stored, duplicates)."""
        received = now_ms()
        accepted = 0
        with self.transaction() as db:
            for e in events:
                cur = db.execute(
                    "INSERT OR IGNORE INTO events (app, event_id, name, timestamp, properties_raw,"
                    " anonymous_id, user_id, session_id, identity, received_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (app, e["id"], e["name"], e["timestamp"], e["properties_raw"], e["anonymous_id"],
                     e["user_id"], e["session_id"], identity, received))
                accepted += cur.rowcount
        return accepted, len(events) - accepted

    # -- config -----------------------------------------------------------

    def publish_config(self, app: str, document: str, is_raw: bool) -> int:
        with self.transaction() as db:
            row = db.execute("SELECT MAX(version) AS v FROM configs WHERE app = ?", (app,)).fetchone()
            version = (row["v"] or 0) + 1
            db.execute("INSERT INTO configs (app, version, document, is_raw, created_at) VALUES (?, ?, ?, ?, ?)",
                       (app, version, document, int(is_raw), now_ms()))
            return version

    def current_config(self, app: str) -> tuple[int, str] | None:
        row = self._one("SELECT version, document FROM configs WHERE app = ? ORDER BY version DESC LIMIT 1",
                        (app,))
        return (row["version"], row["document"]) if row else None

    def configs_after(self, app: str, version: int) -> list[tuple[int, str]]:
        return [(r["version"], r["document"]) for r in self._all(
            "SELECT version, document FROM configs WHERE app = ? AND version > ? ORDER BY version",
            (app, version))]

    # -- idempotency ------------------------------------------------------

    def idempotency_lookup(self, app: str, identity: str, key: str) -> sqlite3.Row | None:
        return self._one("SELECT * FROM idempotency WHERE app = ? AND identity = ? AND key = ?",
                         (app, identity, key))

    def idempotency_store(self, app: str, identity: str, key: str, method: str, path: str,
                          body_sha256: str, status: int, response: str) -> None:
        with self.transaction() as db:
            db.execute("INSERT INTO idempotency (app, identity, key, method, path, body_sha256, status,"
                       " response, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (app, identity, key, method, path, body_sha256, status, response, now_ms()))

    # -- inspection -------------------------------------------------------

    def state(self, app: str) -> dict:
        with self.lock:
            feedback = []
            for row in self._all("SELECT * FROM feedback WHERE app = ? ORDER BY id", (app,)):
                shots = self._all("SELECT content_type, length(data) AS size FROM screenshots"
                                  " WHERE feedback_id = ? ORDER BY id", (row["id"],))
                feedback.append({
                    "id": make_id("f", row["id"]), "text": row["text"],
                    "diagnostics": json.loads(row["diagnostics"]),
                    "screenshot_count": len(shots),
                    "screenshots": [{"content_type": s["content_type"], "size": s["size"]} for s in shots],
                    "author": row["author"], "created_at": row["created_at"]})
            events = []
            for row in self._all("SELECT * FROM events WHERE app = ? ORDER BY seq", (app,)):
                raw = row["properties_raw"]
                events.append({
                    "id": row["event_id"], "name": row["name"], "timestamp": row["timestamp"],
                    "properties": json.loads(raw) if raw is not None else {},
                    "properties_raw": raw, "anonymous_id": row["anonymous_id"],
                    "user_id": row["user_id"], "session_id": row["session_id"],
                    "identity": row["identity"], "received_at": row["received_at"]})
            current = self.current_config(app)
            config = None
            if current is not None:
                try:
                    config = json.loads(current[1])
                except ValueError:
                    config = None  # a raw, deliberately broken payload
            return {
                "boards": self.list_boards(app),
                "ideas": [self._idea(r) for r in self._all(
                    "SELECT * FROM ideas WHERE app = ? ORDER BY id", (app,))],
                "comments": [self._comment(r) for r in self._all(
                    "SELECT * FROM comments WHERE app = ? ORDER BY id", (app,))],
                "feedback": feedback,
                "votes": [{"idea_id": make_id("i", r["idea_id"]), "identity": r["identity"],
                           "created_at": r["created_at"]} for r in self._all(
                    "SELECT * FROM votes WHERE app = ? ORDER BY created_at, rowid", (app,))],
                "messages": [self._message(r) for r in self._all(
                    "SELECT * FROM messages WHERE app = ? ORDER BY id", (app,))],
                "events": events,
                "config": config,
                "config_raw": current[1] if current else None,
                "config_version": current[0] if current else 0,
            }
