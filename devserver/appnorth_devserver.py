#!/usr/bin/env python3
"""AppNorth local development API server.

A loopback implementation of the AppNorth HTTP/JSON protocol (see
docs/protocol.md) for examples, tests and benchmarks of libappnorth. It keeps
real state in SQLite, deduplicates writes by Idempotency-Key and events by
event id, streams config over Server-Sent Events, and exposes /admin endpoints
that tests use to seed data, inspect what arrived and inject faults.

Standard library only (Python 3.11+).

    python3 devserver/appnorth_devserver.py --host 127.0.0.1 --port 0 \
        [--db PATH] [--seed-demo] [--port-file FILE]

Importable too:

    from appnorth_devserver import DevServer
    server = DevServer("127.0.0.1", 0).start()
    ...  # server.url, server.port
    server.stop()
"""

from __future__ import annotations

import argparse
import base64
import binascii
import collections
import contextlib
import dataclasses
import hashlib
import http.server
import ipaddress
import json
import os
import re
import select
import signal
import socket
import socketserver
import sqlite3
import ssl
import sys
import threading
import time
import traceback
from http import HTTPStatus
from typing import Any, Callable, Iterator
from urllib.parse import parse_qsl, urlsplit

# --------------------------------------------------------------------------
# Limits and constants
# --------------------------------------------------------------------------

MAX_BODY = 10 * 1024 * 1024            # any request body
DEFAULT_EVENTS_MAX_BODY = 1024 * 1024  # POST .../events body
DEFAULT_SSE_KEEPALIVE = 15.0           # seconds between ": keepalive" comments
OVERSIZE_DRAIN_SECONDS = 2.0           # see _reject_oversize
SSE_DISCONNECT_POLL = 0.25             # how often an idle stream checks its socket
REQUEST_LOG_LIMIT = 10_000

IDEA_STATUSES = ("open", "planned", "in_progress", "done", "declined")
SCREENSHOT_TYPES = ("image/png", "image/jpeg")
MAX_SCREENSHOTS = 5
MAX_SCREENSHOT_BYTES = 2 * 1024 * 1024
MAX_EVENTS_PER_BATCH = 1000
MAX_SQLITE_INT = 2 ** 63 - 1

APP_ID_RE = re.compile(r"[A-Za-z0-9._-]{1,128}")
IDEMPOTENCY_KEY_RE = re.compile(r"[\x20-\x7e]{1,255}")
PRINTABLE_ASCII_RE = re.compile(r"[\x20-\x7e]*")
CURSOR_RE = re.compile(r"v1:([0-9]{1,18})")

# Error code for each status the server produces on its own.
ERROR_CODES = {
    400: "validation",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "idempotency_conflict",
    413: "payload_too_large",
    429: "rate_limited",
}

JSON_TYPE = "application/json"
SERVER_NAME = "appnorth-devserver/1.0"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# --------------------------------------------------------------------------
# Errors, requests, responses
# --------------------------------------------------------------------------

class ApiError(Exception):
    """An error that becomes a JSON error response."""

    def __init__(self, status: int, code: str, message: str,
                 headers: list[tuple[str, str]] | None = None, close: bool = False,
                 extra: dict | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or []
        self.close = close  # close the connection after answering
        self.extra = extra or {}  # more members of the error object (e.g. "rejected")


def validation(message: str) -> ApiError:
    return ApiError(400, "validation", message)


def not_found(message: str) -> ApiError:
    return ApiError(404, "not_found", message)


def error_body(code: str, message: str, extra: dict | None = None) -> bytes:
    return json_bytes({"error": {"code": code, "message": message, **(extra or {})}})


def json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@dataclasses.dataclass
class Response:
    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    content_type: str | None = JSON_TYPE


def json_response(status: int, obj: Any, headers: list[tuple[str, str]] | None = None) -> Response:
    return Response(status, json_bytes(obj), headers or [])


@dataclasses.dataclass
class StreamResponse:
    """Returned by the config-stream endpoint; the HTTP layer runs the stream."""
    app: str
    last_event_id: int | None


@dataclasses.dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: Any  # http.client.HTTPMessage
    body: bytes
    params: dict[str, str]

    @property
    def app(self) -> str:
        return self.params["app"]

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    def json(self, *, empty_ok: bool = False) -> tuple[dict, str]:
        """The body as a JSON object plus its decoded text (400 on anything else)."""
        return decode_json_object(self.body, empty_ok=empty_ok)


# --------------------------------------------------------------------------
# JSON helpers
# --------------------------------------------------------------------------

def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def decode_json_object(raw: bytes, *, empty_ok: bool = False) -> tuple[dict, str]:
    if not raw.strip():
        if empty_ok:
            return {}, "{}"
        raise validation("request body must be a JSON object")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise validation(f"request body is not valid UTF-8 (byte {exc.start})") from None
    try:
        obj = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise validation(f"request body is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise validation("request body must be a JSON object")
    try:
        canonical_json(obj).encode("utf-8")
    except UnicodeEncodeError:
        raise validation("request body contains an unpaired UTF-16 surrogate escape") from None
    except RecursionError:
        raise validation("request body is nested too deeply") from None
    return obj, text


def canonical_json(obj: Any) -> str:
    """Key-sorted, whitespace-free JSON: equal documents hash equally."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_WS_RE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _skip_ws(text: str, i: int) -> int:
    return _WS_RE.match(text, i).end()


def member_spans(text: str, start: int = 0) -> dict[str, tuple[int, int]]:
    """Source spans of the members of the (already validated) JSON object at
    text[start:]. Later duplicates win, as with json.loads. Used to keep the
    exact text of forwarded values (event properties, config documents)."""
    i = _skip_ws(text, start)
    assert text[i] == "{"
    i = _skip_ws(text, i + 1)
    spans: dict[str, tuple[int, int]] = {}
    if text[i] == "}":
        return spans
    while True:
        key, i = json.decoder.scanstring(text, i + 1)
        i = _skip_ws(text, i)
        value_start = _skip_ws(text, i + 1)  # past ':'
        _, value_end = _DECODER.raw_decode(text, value_start)
        spans[key] = (value_start, value_end)
        i = _skip_ws(text, value_end)
        if text[i] == "}":
            return spans
        i = _skip_ws(text, i + 1)  # past ','


def element_spans(text: str, start: int) -> list[tuple[int, int]]:
    """Source spans of the elements of the (already validated) JSON array at text[start:]."""
    i = _skip_ws(text, start)
    assert text[i] == "["
    i = _skip_ws(text, i + 1)
    spans: list[tuple[int, int]] = []
    if text[i] == "]":
        return spans
    while True:
        _, end = _DECODER.raw_decode(text, i)
        spans.append((i, end))
        i = _skip_ws(text, end)
        if text[i] == "]":
            return spans
        i = _skip_ws(text, i + 1)


def one_line(json_text: str) -> str:
    """Valid JSON never has a raw CR/LF inside a string, so folding them into
    spaces keeps the document's meaning and its number spellings."""
    return json_text.replace("\r", " ").replace("\n", " ")


# --------------------------------------------------------------------------
# Field validation
# --------------------------------------------------------------------------

def req_str(obj: dict, key: str, lo: int, hi: int, *, where: str = "",
            optional: bool = False, not_blank: bool = False) -> str | None:
    name = f"{where}{key}"
    if key not in obj or (optional and obj[key] is None):
        if optional:
            return None
        raise validation(f"missing field '{name}'")
    value = obj[key]
    if not isinstance(value, str):
        raise validation(f"field '{name}' must be a string")
    if len(value) < lo or (not_blank and not value.strip()):
        raise validation(f"field '{name}' must not be empty")
    if len(value) > hi:
        raise validation(f"field '{name}' is too long (max {hi} characters)")
    return value


def check_app_id(app: str) -> None:
    if not APP_ID_RE.fullmatch(app):
        raise validation("app id must be 1-128 characters of [A-Za-z0-9._-]")


def make_id(prefix: str, rowid: int) -> str:
    return f"{prefix}_{rowid}"


def parse_id(prefix: str, text: str | None) -> int | None:
    """Row id from a public id like 'i_12'; None when it cannot be ours."""
    if not text:
        return None
    m = re.fullmatch(prefix + r"_([1-9][0-9]{0,17})", text)
    return int(m.group(1)) if m else None


# --------------------------------------------------------------------------
# Storage: one SQLite connection guarded by a re-entrant lock
# --------------------------------------------------------------------------

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


# --------------------------------------------------------------------------
# Idempotency-Key replay
# --------------------------------------------------------------------------

class IdempotencyGuard:
    """Runs a write at most once per (app, identity, Idempotency-Key).

    The lookup, the write and the stored record share one transaction, so a
    concurrent retry with the same key waits and then replays. Only 2xx
    responses are stored: a retry after an error gets a fresh attempt."""

    def __init__(self, store: Storage):
        self.store = store

    def run(self, app: str, identity: str, key: str, method: str, path: str,
            body_sha256: str, write: Callable[[], Response]) -> Response:
        with self.store.transaction():
            record = self.store.idempotency_lookup(app, identity, key)
            if record is not None:
                if (record["method"], record["path"], record["body_sha256"]) != (method, path, body_sha256):
                    raise ApiError(409, "idempotency_conflict",
                                   "Idempotency-Key was already used for a different request")
                return Response(record["status"], record["response"].encode("utf-8"),
                                [("Idempotent-Replayed", "true")])
            response = write()
            if 200 <= response.status < 300:
                self.store.idempotency_store(app, identity, key, method, path, body_sha256,
                                             response.status, response.body.decode("utf-8"))
            return response


# --------------------------------------------------------------------------
# Fault injection
# --------------------------------------------------------------------------

@dataclasses.dataclass
class Fault:
    id: str
    kind: str                 # "status" | "drop" | "delay" | "endless_line" | "raw_response"
    path_prefix: str | None
    method: str | None
    remaining: int
    status: int | None = None
    retry_after: str | None = None
    body: bytes | None = None
    delay_ms: float = 0

    def matches(self, method: str, path: str) -> bool:
        return ((self.method is None or self.method == method)
                and (self.path_prefix is None or path.startswith(self.path_prefix)))

    def describe(self) -> dict:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "path_prefix": self.path_prefix,
                               "method": self.method, "count": self.remaining}
        if self.kind == "status":
            out.update(status=self.status, retry_after=self.retry_after)
        elif self.kind == "drop":
            out["drop"] = True
        elif self.kind == "endless_line":
            out["endless_line"] = True
        elif self.kind == "raw_response":
            out["raw_response"] = base64.b64encode(self.body or b"").decode("ascii")
        if self.delay_ms or self.kind == "delay":
            out["delay_ms"] = self.delay_ms
        return out


class FaultQueue:
    """FIFO list of injected faults; the first fault matching a request serves it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._next_id = 1

    def add(self, spec: dict) -> Fault:
        fault = self._parse(spec)
        with self._lock:
            fault.id = f"fault_{self._next_id}"
            self._next_id += 1
            self._faults.append(fault)
        return fault

    def take(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.matches(method, path):
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def list(self) -> list[dict]:
        with self._lock:
            return [f.describe() for f in self._faults]

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    @staticmethod
    def _parse(spec: dict) -> Fault:
        prefix = spec.get("path_prefix")
        if prefix is not None and (not isinstance(prefix, str) or not prefix.startswith("/")):
            raise validation("'path_prefix' must be a string starting with '/'")
        method = spec.get("method")
        if method is not None and (not isinstance(method, str) or not method.isalpha()):
            raise validation("'method' must be an HTTP method name")
        count = spec.get("count", 1)
        if not _is_int(count) or not 1 <= count <= 1_000_000:
            raise validation("'count' must be an integer >= 1")
        kinds = [k for k in ("status", "drop", "endless_line", "raw_response") if spec.get(k) is not None] or (
            ["delay_ms"] if spec.get("delay_ms") is not None else [])
        if len(kinds) != 1:
            raise validation("give exactly one of 'status', 'drop', 'delay_ms', 'endless_line' or 'raw_response'"
                             " (a delay may precede status or drop)")
        if kinds[0] in ("endless_line", "raw_response") and spec.get("delay_ms") is not None:
            raise validation("'delay_ms' may precede 'status' or 'drop' only")
        fault = Fault("", "", prefix, method.upper() if method else None, count)
        delay = spec.get("delay_ms")
        if delay is not None:
            if not isinstance(delay, (int, float)) or isinstance(delay, bool) or not 0 <= delay <= 600_000:
                raise validation("'delay_ms' must be a number 0-600000")
            fault.delay_ms = delay
        if kinds[0] == "status":
            status = spec["status"]
            if not _is_int(status) or not 100 <= status <= 599:
                raise validation("'status' must be an integer 100-599")
            fault.kind, fault.status = "status", status
            retry_after = spec.get("retry_after")
            if retry_after is not None:
                if not isinstance(retry_after, str) or not PRINTABLE_ASCII_RE.fullmatch(retry_after):
                    raise validation("'retry_after' must be a printable ASCII string")
                fault.retry_after = retry_after
            body = spec.get("body")
            if body is None:
                code = ERROR_CODES.get(status, "injected")
                body = {"error": {"code": "injected" if status >= 500 else code,
                                  "message": f"injected fault: HTTP {status}"}}
            # A string body is sent verbatim (e.g. an HTML page from a proxy).
            fault.body = body.encode("utf-8") if isinstance(body, str) else json_bytes(body)
        elif kinds[0] == "drop":
            if spec["drop"] is not True:
                raise validation("'drop' must be true")
            fault.kind = "drop"
        elif kinds[0] == "endless_line":
            if spec["endless_line"] is not True:
                raise validation("'endless_line' must be true")
            fault.kind = "endless_line"
        elif kinds[0] == "raw_response":
            raw = spec["raw_response"]
            try:
                fault.body = base64.b64decode(raw, validate=True) if isinstance(raw, str) else None
            except binascii.Error:
                fault.body = None
            if not fault.body:
                raise validation("'raw_response' must be non-empty base64 (the bytes sent as the whole response)")
            fault.kind = "raw_response"
        else:
            fault.kind = "delay"
        return fault


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------
# Request log
# --------------------------------------------------------------------------

class RequestLog:
    """Bounded log of API (non-admin) requests for tests to inspect."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: collections.deque[dict] = collections.deque(maxlen=REQUEST_LOG_LIMIT)
        self._seq = 0

    def add(self, entry: dict) -> None:
        with self._lock:
            self._seq += 1
            entry["seq"] = self._seq
            self._entries.append(entry)

    def since(self, seq: int) -> list[dict]:
        with self._lock:
            return [dict(e) for e in self._entries if e["seq"] > seq]

    def clear(self) -> None:
        # seq keeps counting so a stale ?since= never re-reads old entries.
        with self._lock:
            self._entries.clear()


# --------------------------------------------------------------------------
# Config stream hub
# --------------------------------------------------------------------------

class ConfigHub:
    """Wakes config streams when a version is published.

    Streams wait on one Condition and compare a per-app generation; a reset
    bumps the epoch so streams restart their version count from zero."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._epoch = 0
        self._gens: dict[str, int] = {}
        self._stopping = False
        self._active = 0

    def generation(self, app: str) -> tuple[int, int]:
        with self._cond:
            return self._epoch, self._gens.get(app, 0)

    def published(self, app: str) -> None:
        with self._cond:
            self._gens[app] = self._gens.get(app, 0) + 1
            self._cond.notify_all()

    def reset(self) -> None:
        with self._cond:
            self._epoch += 1
            self._gens.clear()
            self._cond.notify_all()

    def wait(self, app: str, seen: tuple[int, int], timeout: float) -> tuple[tuple[int, int], bool]:
        """Block until the app's generation differs from `seen`, stop, or timeout."""
        with self._cond:
            self._cond.wait_for(
                lambda: self._stopping or (self._epoch, self._gens.get(app, 0)) != seen,
                timeout=max(timeout, 0))
            return (self._epoch, self._gens.get(app, 0)), self._stopping

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    @property
    def stopping(self) -> bool:
        return self._stopping

    @contextlib.contextmanager
    def stream(self) -> Iterator[None]:
        with self._cond:
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1

    @property
    def active_streams(self) -> int:
        with self._cond:
            return self._active


def sse_event(version: int, document: str) -> bytes:
    data = f'{{"version":{version},"config":{document}}}'
    # Raw (deliberately broken) payloads may hold newlines: SSE spells those as
    # several data: lines, which a conforming client joins with "\n".
    lines = "".join(f"data: {line}\n" for line in data.split("\n"))
    return f"id: {version}\nevent: config\n{lines}\n".encode("utf-8")


# --------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------

@dataclasses.dataclass
class Settings:
    events_max_body: int = DEFAULT_EVENTS_MAX_BODY
    sse_keepalive: float = DEFAULT_SSE_KEEPALIVE
    # Event names the app's schema refuses (422 listing those events' ids).
    rejected_event_names: list[str] = dataclasses.field(default_factory=list)

    def update(self, spec: dict) -> None:
        unknown = set(spec) - {"events_max_body", "sse_keepalive", "rejected_event_names"}
        if unknown:
            raise validation(f"unknown setting(s): {', '.join(sorted(unknown))}")
        if "events_max_body" in spec:
            value = spec["events_max_body"]
            if not _is_int(value) or not 1 <= value <= MAX_BODY:
                raise validation(f"'events_max_body' must be an integer 1-{MAX_BODY}")
        if "sse_keepalive" in spec:
            value = spec["sse_keepalive"]
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.01 <= value <= 3600:
                raise validation("'sse_keepalive' must be a number of seconds 0.01-3600")
        if "rejected_event_names" in spec:
            names = spec["rejected_event_names"]
            if (not isinstance(names, list) or len(names) > 100
                    or not all(isinstance(n, str) and 1 <= len(n) <= 256 for n in names)):
                raise validation("'rejected_event_names' must be a list of at most 100 names of 1-256 characters")
            self.rejected_event_names = list(names)
        if "events_max_body" in spec:
            self.events_max_body = spec["events_max_body"]
        if "sse_keepalive" in spec:
            self.sse_keepalive = float(spec["sse_keepalive"])

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


# --------------------------------------------------------------------------
# Public API endpoints (/v1/apps/{app}/...)
# --------------------------------------------------------------------------

class ApiEndpoints:
    def __init__(self, server: "DevServer"):
        self.server = server
        self.store = server.store
        self.idempotency = IdempotencyGuard(server.store)
        self.hub = server.hub

    # -- common request parts ---------------------------------------------

    def identity(self, req: Request) -> str:
        """Lowercased email of a registered credential, or 'anonymous'."""
        auth = req.header("Authorization")
        email = req.header("AppNorth-User-Email")
        if auth is None and email is None:
            return "anonymous"
        if auth is None or email is None:
            raise ApiError(401, "unauthorized",
                           "send both Authorization and AppNorth-User-Email, or neither")
        scheme, _, token = auth.strip().partition(" ")
        token = token.strip()
        # Header bytes arrive latin-1 decoded; emails may be UTF-8.
        email = email.encode("latin-1", "replace").decode("utf-8", "replace").strip().lower()
        if scheme.lower() != "bearer" or not token or not email:
            raise ApiError(401, "unauthorized", "Authorization must be 'Bearer <token>'")
        if not self.store.credential_valid(req.app, email, token):
            raise ApiError(401, "unauthorized", "unknown credential for this app")
        return email

    def _write(self, req: Request, identity: str, write: Callable[[dict], Response],
               *, empty_body_ok: bool = False) -> Response:
        """Validate the Idempotency-Key and body, then run `write` at most once."""
        key = req.header("Idempotency-Key")
        if key is None or not IDEMPOTENCY_KEY_RE.fullmatch(key):
            raise validation("header Idempotency-Key is required: 1-255 printable ASCII characters")
        data, _ = req.json(empty_ok=empty_body_ok)
        digest = hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest()
        return self.idempotency.run(req.app, identity, key, req.method, req.path, digest,
                                    lambda: write(data))

    def _idea_or_404(self, req: Request) -> int:
        idea_id = parse_id("i", req.params["idea"])
        if self.store.get_idea(req.app, idea_id) is None:
            raise not_found(f"idea '{req.params['idea']}' not found")
        return idea_id

    # -- reads ------------------------------------------------------------

    def list_boards(self, req: Request) -> Response:
        self.identity(req)
        return json_response(200, {"boards": self.store.list_boards(req.app)})

    def list_ideas(self, req: Request) -> Response:
        self.identity(req)
        q = req.query
        board_id = None
        if q.get("board"):
            board_id = parse_id("b", q["board"])
            if not self.store.board_exists(req.app, board_id):
                raise not_found(f"board '{q['board']}' not found")
        status = q.get("status") or None
        if status is not None and status not in IDEA_STATUSES:
            raise validation(f"status must be one of {', '.join(IDEA_STATUSES)}")
        limit = 20
        if q.get("limit"):
            if not re.fullmatch(r"[0-9]{1,4}", q["limit"]) or not 1 <= int(q["limit"]) <= 100:
                raise validation("limit must be an integer 1-100")
            limit = int(q["limit"])
        after = 0
        if q.get("cursor"):
            after = decode_cursor(q["cursor"])
        ideas, last = self.store.list_ideas(req.app, board_id, q.get("q") or None, status, after, limit)
        return json_response(200, {"ideas": ideas,
                                   "next_cursor": encode_cursor(last) if last is not None else None})

    def list_comments(self, req: Request) -> Response:
        self.identity(req)
        idea_id = self._idea_or_404(req)
        return json_response(200, {"comments": self.store.list_comments(req.app, idea_id)})

    def list_messages(self, req: Request) -> Response:
        identity = self.identity(req)
        return json_response(200, {"messages": self.store.list_messages(req.app, identity)})

    # -- writes -----------------------------------------------------------

    def create_idea(self, req: Request) -> Response:
        identity = self.identity(req)

        def write(data: dict) -> Response:
            board = req_str(data, "board_id", 1, 64)
            title = req_str(data, "title", 1, 200)
            body = req_str(data, "body", 0, 10_000, optional=True) or ""
            board_id = parse_id("b", board)
            if not self.store.board_exists(req.app, board_id):
                raise not_found(f"board '{board}' not found")
            idea = self.store.create_idea(req.app, board_id, title, body, "open", identity)
            return json_response(201, {"idea": idea})
        return self._write(req, identity, write)

    def create_comment(self, req: Request) -> Response:
        identity = self.identity(req)

        def write(data: dict) -> Response:
            body = req_str(data, "body", 1, 10_000, not_blank=True)
            idea_id = self._idea_or_404(req)
            return json_response(201, {"comment": self.store.add_comment(req.app, idea_id, body, identity)})
        return self._write(req, identity, write)

    def create_vote(self, req: Request) -> Response:
        identity = self.identity(req)

        def write(data: dict) -> Response:
            idea_id = self._idea_or_404(req)
            try:
                votes = self.store.add_vote(req.app, idea_id, identity)
            except AlreadyVoted:
                raise ApiError(409, "already_voted", "this identity already voted for the idea") from None
            return json_response(201, {"vote": {"idea_id": req.params["idea"], "votes": votes}})
        return self._write(req, identity, write, empty_body_ok=True)

    def create_feedback(self, req: Request) -> Response:
        identity = self.identity(req)

        def write(data: dict) -> Response:
            text = req_str(data, "text", 1, 20_000)
            diagnostics = data.get("diagnostics")
            if diagnostics is None:
                diagnostics = {}
            if not isinstance(diagnostics, dict):
                raise validation("field 'diagnostics' must be an object")
            screenshots = decode_screenshots(data.get("screenshots"))
            feedback = self.store.add_feedback(req.app, text, diagnostics, screenshots, identity)
            return json_response(201, {"feedback": feedback})
        return self._write(req, identity, write)

    def create_message(self, req: Request) -> Response:
        identity = self.identity(req)

        def write(data: dict) -> Response:
            body = req_str(data, "body", 1, 4000)
            return json_response(201, {"message": self.store.add_message(req.app, body, identity)})
        return self._write(req, identity, write)

    # -- events -----------------------------------------------------------

    def post_events(self, req: Request) -> Response:
        identity = self.identity(req)
        data, text = req.json()
        events = data.get("events")
        if not isinstance(events, list):
            raise validation("field 'events' must be an array")
        if not 1 <= len(events) <= MAX_EVENTS_PER_BATCH:
            raise validation(f"a batch holds 1-{MAX_EVENTS_PER_BATCH} events")
        rows = self._checked_events(events)
        # Keep each properties value exactly as the client spelled it.
        top = member_spans(text)
        start, _ = top["events"]
        for row, (es, _) in zip(rows, element_spans(text, start)):
            if row["has_properties"]:
                ps, pe = member_spans(text, es)["properties"]
                row["properties_raw"] = text[ps:pe]
        accepted, duplicates = self.store.insert_events(req.app, identity, rows)
        return json_response(200, {"accepted": accepted, "duplicates": duplicates})

    def _checked_events(self, events: list) -> list[dict]:
        """Validates a batch; nothing is stored unless every event passes.

        An invalid event whose id is readable is listed in the error's
        `rejected` array (400), as is a valid event whose name the app's
        schema refuses (`rejected_event_names`, 422), so the client can drop
        just those and resend the rest. An invalid event without a readable
        id fails the batch with no list."""
        rows, rejected, invalid = [], [], False
        refused = set(self.server.settings.rejected_event_names)
        for i, event in enumerate(events):
            try:
                row = validate_event(event, i)
            except ApiError as exc:
                event_id = event.get("id") if isinstance(event, dict) else None
                if not isinstance(event_id, str) or not 1 <= len(event_id) <= 64:
                    raise
                rejected.append({"id": event_id, "message": exc.message})
                invalid = True
                continue
            if row["name"] in refused:
                rejected.append({"id": row["id"], "message": f"event name '{row['name']}' is refused by the app's schema"})
            rows.append(row)
        if rejected:
            status = 400 if invalid else 422
            raise ApiError(status, "validation", f"{len(rejected)} of {len(events)} events rejected; nothing stored",
                           extra={"rejected": rejected})
        return rows

    # -- config -----------------------------------------------------------

    def get_config(self, req: Request) -> Response:
        self.identity(req)
        current = self.store.current_config(req.app)
        if current is None:
            raise not_found("no config published for this app")
        version, document = current
        etag = f'"{version}"'
        headers = [("ETag", etag), ("Cache-Control", "no-cache")]
        if etag_matches(req.header("If-None-Match"), etag):
            return Response(304, b"", headers)
        body = f'{{"version":{version},"config":{document}}}'.encode("utf-8")
        return Response(200, body, headers)

    def config_stream(self, req: Request) -> StreamResponse:
        self.identity(req)
        last = req.header("Last-Event-ID")
        last_id = int(last.strip()) if last and last.strip().isdigit() else None
        return StreamResponse(req.app, last_id)


def encode_cursor(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"v1:{last_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, ValueError):
        text = ""
    m = CURSOR_RE.fullmatch(text)
    if not m:
        raise validation("invalid cursor")
    return int(m.group(1))


def etag_matches(header: str | None, etag: str) -> bool:
    if not header:
        return False
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate.startswith("W/"):
            candidate = candidate[2:]
        if candidate in (etag, "*"):
            return True
    return False


def decode_screenshots(value: Any) -> list[tuple[str, bytes]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise validation("field 'screenshots' must be an array")
    if len(value) > MAX_SCREENSHOTS:
        raise validation(f"at most {MAX_SCREENSHOTS} screenshots")
    out = []
    for i, shot in enumerate(value):
        where = f"screenshots[{i}]."
        if not isinstance(shot, dict):
            raise validation(f"screenshots[{i}] must be an object")
        content_type = req_str(shot, "content_type", 1, 64, where=where)
        if content_type not in SCREENSHOT_TYPES:
            raise validation(f"field '{where}content_type' must be image/png or image/jpeg")
        encoded = req_str(shot, "data_base64", 1, MAX_BODY, where=where)
        # A cheap bound before decoding: 4 base64 chars carry 3 bytes.
        if len(encoded) > (MAX_SCREENSHOT_BYTES + 2) // 3 * 4 + 4:
            raise validation(f"field '{where}data_base64' decodes to more than {MAX_SCREENSHOT_BYTES} bytes")
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise validation(f"field '{where}data_base64' is not valid base64") from None
        if len(data) > MAX_SCREENSHOT_BYTES:
            raise validation(f"field '{where}data_base64' decodes to more than {MAX_SCREENSHOT_BYTES} bytes")
        out.append((content_type, data))
    return out


def validate_event(event: Any, index: int) -> dict:
    where = f"events[{index}]."
    if not isinstance(event, dict):
        raise validation(f"events[{index}] must be an object")
    timestamp = event.get("timestamp")
    if not _is_int(timestamp) or not 0 <= timestamp <= MAX_SQLITE_INT:
        raise validation(f"field '{where}timestamp' must be an integer (ms since epoch)")
    properties = event.get("properties")
    if properties is not None and not isinstance(properties, dict):
        raise validation(f"field '{where}properties' must be an object")
    return {
        "id": req_str(event, "id", 1, 64, where=where),
        "name": req_str(event, "name", 1, 256, where=where),
        "timestamp": timestamp,
        "anonymous_id": req_str(event, "anonymous_id", 1, 256, where=where),
        "user_id": req_str(event, "user_id", 0, 256, where=where, optional=True),
        "session_id": req_str(event, "session_id", 0, 256, where=where, optional=True),
        "has_properties": properties is not None,
        "properties_raw": None,
    }


# --------------------------------------------------------------------------
# Admin endpoints (/admin/...)
# --------------------------------------------------------------------------

class AdminEndpoints:
    def __init__(self, server: "DevServer"):
        self.server = server
        self.store = server.store

    def health(self, req: Request) -> Response:
        return json_response(200, {"ok": True, "sse_streams": self.server.hub.active_streams})

    def reset(self, req: Request) -> Response:
        data, _ = req.json(empty_ok=True)
        self.server.reset(seed_demo=data.get("seed_demo") is True)
        return json_response(200, {"ok": True})

    def add_user(self, req: Request) -> Response:
        data, _ = req.json()
        app = req_str(data, "app", 1, 128)
        check_app_id(app)
        email = req_str(data, "email", 1, 320, not_blank=True).strip().lower()
        token = req_str(data, "token", 1, 4096, not_blank=True)
        if token != token.strip() or " " in token:
            raise validation("field 'token' must not contain spaces")
        self.store.register_user(app, email, token)
        return json_response(201, {"user": {"app": app, "email": email}})

    def add_board(self, req: Request) -> Response:
        data, _ = req.json()
        name = req_str(data, "name", 1, 200)
        description = req_str(data, "description", 0, 10_000, optional=True) or ""
        return json_response(201, {"board": self.store.create_board(req.app, name, description)})

    def add_idea(self, req: Request) -> Response:
        data, _ = req.json()
        board = req_str(data, "board_id", 1, 64)
        title = req_str(data, "title", 1, 200)
        body = req_str(data, "body", 0, 10_000, optional=True) or ""
        status = req_str(data, "status", 1, 32, optional=True) or "open"
        author = req_str(data, "author", 1, 320, optional=True) or "admin"
        if status not in IDEA_STATUSES:
            raise validation(f"status must be one of {', '.join(IDEA_STATUSES)}")
        board_id = parse_id("b", board)
        if not self.store.board_exists(req.app, board_id):
            raise not_found(f"board '{board}' not found")
        idea = self.store.create_idea(req.app, board_id, title, body, status, author)
        return json_response(201, {"idea": idea})

    def delete_idea(self, req: Request) -> Response:
        idea_id = parse_id("i", req.params["idea"])
        if idea_id is None or not self.store.delete_idea(req.app, idea_id):
            raise not_found(f"idea '{req.params['idea']}' not found")
        return json_response(200, {"ok": True})

    def publish_config(self, req: Request) -> Response:
        data, text = req.json()
        if ("config" in data) == ("raw" in data):
            raise validation("give exactly one of 'config' (object) or 'raw' (string)")
        if "raw" in data:
            if not isinstance(data["raw"], str):
                raise validation("field 'raw' must be a string")
            document, is_raw = data["raw"], True
        else:
            if not isinstance(data["config"], dict):
                raise validation("field 'config' must be an object")
            start, end = member_spans(text)["config"]
            document, is_raw = one_line(text[start:end]), False
        version = self.store.publish_config(req.app, document, is_raw)
        self.server.hub.published(req.app)
        return json_response(201, {"version": version})

    def state(self, req: Request) -> Response:
        return json_response(200, self.store.state(req.app))

    def list_requests(self, req: Request) -> Response:
        since = req.query.get("since") or "0"
        if not since.isdigit():
            raise validation("since must be a non-negative integer")
        return json_response(200, {"requests": self.server.request_log.since(int(since))})

    def clear_requests(self, req: Request) -> Response:
        self.server.request_log.clear()
        return json_response(200, {"ok": True})

    def add_fault(self, req: Request) -> Response:
        data, _ = req.json()
        fault = self.server.faults.add(data)
        return json_response(201, {"id": fault.id, "fault": fault.describe()})

    def list_faults(self, req: Request) -> Response:
        return json_response(200, {"faults": self.server.faults.list()})

    def clear_faults(self, req: Request) -> Response:
        self.server.faults.clear()
        return json_response(200, {"ok": True})

    def get_settings(self, req: Request) -> Response:
        return json_response(200, {"settings": self.server.settings.as_dict()})

    def update_settings(self, req: Request) -> Response:
        data, _ = req.json()
        self.server.settings.update(data)
        return json_response(200, {"settings": self.server.settings.as_dict()})


# --------------------------------------------------------------------------
# Routing
# --------------------------------------------------------------------------

class Router:
    """Maps (method, path template) to endpoint functions; a path that matches
    with another method yields 405."""

    def __init__(self) -> None:
        self._routes: list[tuple[re.Pattern, dict[str, Callable]]] = []

    def add(self, method: str, template: str, func: Callable) -> None:
        pattern = re.compile(re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", template) + r"\Z")
        for existing, methods in self._routes:
            if existing.pattern == pattern.pattern:
                methods[method] = func
                return
        self._routes.append((pattern, {method: func}))

    def resolve(self, method: str, path: str) -> tuple[Callable, dict[str, str]]:
        for pattern, methods in self._routes:
            m = pattern.match(path)
            if m:
                if method not in methods:
                    raise ApiError(405, "method_not_allowed", f"{method} is not allowed on {path}",
                                   headers=[("Allow", ", ".join(sorted(methods)))])
                params = m.groupdict()
                if "app" in params:
                    check_app_id(params["app"])
                return methods[method], params
        raise not_found(f"no endpoint at {path}")


def build_router(api: ApiEndpoints, admin: AdminEndpoints) -> Router:
    r = Router()
    base = "/v1/apps/{app}"
    r.add("GET", f"{base}/boards", api.list_boards)
    r.add("GET", f"{base}/ideas", api.list_ideas)
    r.add("POST", f"{base}/ideas", api.create_idea)
    r.add("GET", f"{base}/ideas/{{idea}}/comments", api.list_comments)
    r.add("POST", f"{base}/ideas/{{idea}}/comments", api.create_comment)
    r.add("POST", f"{base}/ideas/{{idea}}/votes", api.create_vote)
    r.add("POST", f"{base}/feedback", api.create_feedback)
    r.add("GET", f"{base}/chat/messages", api.list_messages)
    r.add("POST", f"{base}/chat/messages", api.create_message)
    r.add("GET", f"{base}/config", api.get_config)
    r.add("GET", f"{base}/config/stream", api.config_stream)
    r.add("POST", f"{base}/events", api.post_events)

    r.add("GET", "/admin/health", admin.health)
    r.add("POST", "/admin/reset", admin.reset)
    r.add("POST", "/admin/users", admin.add_user)
    r.add("POST", "/admin/apps/{app}/boards", admin.add_board)
    r.add("POST", "/admin/apps/{app}/ideas", admin.add_idea)
    r.add("DELETE", "/admin/apps/{app}/ideas/{idea}", admin.delete_idea)
    r.add("POST", "/admin/apps/{app}/config", admin.publish_config)
    r.add("GET", "/admin/apps/{app}/state", admin.state)
    r.add("GET", "/admin/requests", admin.list_requests)
    r.add("DELETE", "/admin/requests", admin.clear_requests)
    r.add("GET", "/admin/faults", admin.list_faults)
    r.add("POST", "/admin/faults", admin.add_fault)
    r.add("DELETE", "/admin/faults", admin.clear_faults)
    r.add("GET", "/admin/settings", admin.get_settings)
    r.add("POST", "/admin/settings", admin.update_settings)
    return r


EVENTS_PATH_RE = re.compile(r"/v1/apps/[^/]+/events\Z")


def is_admin_path(path: str) -> bool:
    return path == "/admin" or path.startswith("/admin/")


def is_loopback(host: str) -> bool:
    try:
        addr = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.is_loopback


# --------------------------------------------------------------------------
# HTTP layer
# --------------------------------------------------------------------------

class _Handler(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 plumbing: bodies, limits, faults, logging, responses and SSE.
    Endpoint logic lives in ApiEndpoints / AdminEndpoints."""

    protocol_version = "HTTP/1.1"
    server_version = SERVER_NAME
    sys_version = ""
    disable_nagle_algorithm = True  # small SSE writes must leave at once
    server: "_HTTPServer"

    # -- entry points -------------------------------------------------------

    def _dispatch(self) -> None:
        try:
            self._handle()
        except OSError:
            # The client went away mid-response; nothing left to tell it.
            self.close_connection = True
        except Exception:  # noqa: BLE001 - e.g. the database closed under a stream at stop()
            self.close_connection = True
            if not self.server.dev.stopped.is_set():
                traceback.print_exc(file=sys.stderr)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _dispatch

    def _handle(self) -> None:
        started = self._started = time.monotonic()
        split = urlsplit(self.path)
        log = None if is_admin_path(split.path) else {
            "method": self.command, "path": split.path, "query": split.query,
            "headers": self._logged_headers(), "body_size": 0, "status": None,
            "fault": None, "time_ms": now_ms(), "duration_ms": 0}
        response: Response | StreamResponse | None = None
        try:
            response = self._respond(split.path, split.query, log)
            if isinstance(response, StreamResponse):
                if log is not None:  # log the stream as soon as it opens
                    log["status"] = 200
                    self._finish_log(log, started)
                    log = None
                self._run_stream(response)
            elif response is not None:
                if log is not None:
                    # Log before answering: a client that got its answer
                    # must find its request in the log.
                    log["status"] = response.status
                    self._finish_log(log, started)
                    log = None
                self._send(response)
        finally:
            if log is not None:
                self._finish_log(log, started)
            if self.server.dev.verbose:
                status = 200 if isinstance(response, StreamResponse) else getattr(response, "status", "-")
                self.log_message('"%s %s" %s', self.command, self.path, status)

    def _respond(self, path: str, query: str, log: dict | None) -> Response | StreamResponse | None:
        """The response for this request, or None when it was already answered
        (oversized body) or deliberately left unanswered (drop fault)."""
        dev = self.server.dev
        try:
            if log is None and not is_loopback(self.client_address[0]):
                raise ApiError(403, "forbidden", "admin endpoints are loopback-only", close=True)
            body = self._read_body(self._body_limit(path), log)
            if log is not None:  # faults never apply to /admin
                fault = dev.faults.take(self.command, path)
                if fault is not None:
                    log["fault"] = fault.kind
                    if fault.delay_ms:  # a slow server, then its answer (or none)
                        dev.stopped.wait(fault.delay_ms / 1000)
                    if fault.kind in ("drop", "endless_line", "raw_response"):
                        # Log before the connection closes: a client that saw
                        # the drop must find its request in the log.
                        self._finish_log(log, self._started)
                    response = self._apply_fault(fault)
                    if response is not None or fault.kind in ("drop", "endless_line", "raw_response"):
                        return response
            func, params = dev.router.resolve(self.command, path)
            params_query = dict(parse_qsl(query, keep_blank_values=True))
            return func(Request(self.command, path, params_query, self.headers, body, params))
        except _AlreadyAnswered as exc:
            if log is not None:
                log["status"] = exc.status
            return None
        except ApiError as exc:
            if exc.close:
                self.close_connection = True
            return Response(exc.status, error_body(exc.code, exc.message, exc.extra), exc.headers)
        except OSError:
            raise
        except Exception:  # noqa: BLE001 - a bug must never reach the client as a traceback
            traceback.print_exc(file=sys.stderr)
            return Response(500, error_body("server_error", "internal error in the dev server"))

    def _finish_log(self, log: dict, started: float) -> None:
        if "seq" in log:  # already logged (a drop fault logs before closing)
            return
        log["duration_ms"] = round((time.monotonic() - started) * 1000, 3)
        self.server.dev.request_log.add(log)

    def _logged_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            if name.lower() == "authorization":
                value = "Bearer ***"
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        return headers

    # -- bodies ---------------------------------------------------------------

    def _body_limit(self, path: str) -> int:
        if self.command == "POST" and EVENTS_PATH_RE.match(path):
            return min(self.server.dev.settings.events_max_body, MAX_BODY)
        return MAX_BODY

    def _declared_length(self) -> int | None:
        value = self.headers.get("Content-Length")
        if value is None:
            return None
        value = value.strip()
        if not value.isdigit():
            raise ApiError(400, "validation", "invalid Content-Length", close=True)
        return int(value)

    def _read_body(self, limit: int, log: dict | None) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            body = self._read_chunked(limit)
        else:
            length = self._declared_length() or 0
            if log is not None:
                log["body_size"] = length
            if length > limit:
                self._reject_oversize(limit)
            body = self.rfile.read(length) if length else b""
            if len(body) < length:
                raise ApiError(400, "validation", "request body shorter than Content-Length", close=True)
        if log is not None:
            log["body_size"] = len(body)
        return body

    def _read_chunked(self, limit: int) -> bytes:
        parts, total = [], 0
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ApiError(400, "validation", "malformed chunked body", close=True) from None
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            total += size
            if total > limit:
                self._reject_oversize(limit)
            parts.append(self.rfile.read(size))
            self.rfile.readline(3)

    def _reject_oversize(self, limit: int) -> None:
        """Answer 413 without reading the body, then close. A short, bounded
        drain afterwards lets a client that is still sending see the 413
        instead of a connection reset."""
        self._send(Response(413, error_body("payload_too_large", f"request body exceeds {limit} bytes")),
                   close=True)
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(0.2)
            deadline = time.monotonic() + OVERSIZE_DRAIN_SECONDS
            while time.monotonic() < deadline and self.connection.recv(65536):
                pass
        raise _AlreadyAnswered(413)

    def handle_expect_100(self) -> bool:
        # Refuse an oversized body before the client sends it.
        try:
            path = urlsplit(self.path).path
            length = self._declared_length()
            if length is not None and length > self._body_limit(path):
                log = None if is_admin_path(path) else {
                    "method": self.command, "path": path, "query": urlsplit(self.path).query,
                    "headers": self._logged_headers(), "body_size": length, "status": 413,
                    "fault": None, "time_ms": now_ms(), "duration_ms": 0}
                self._send(Response(413, error_body(
                    "payload_too_large", f"request body exceeds {self._body_limit(path)} bytes")), close=True)
                if log is not None:
                    self.server.dev.request_log.add(log)
                return False
        except ApiError:
            pass  # a bad Content-Length is reported by the normal path
        except OSError:
            self.close_connection = True
            return False
        return super().handle_expect_100()

    # -- faults -----------------------------------------------------------------

    def _apply_fault(self, fault: Fault) -> Response | None:
        if fault.kind == "drop":
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return None
        if fault.kind == "delay":  # waited in _respond; now handled normally
            return None
        if fault.kind == "endless_line":
            self._send_endless_line()
            return None
        if fault.kind == "raw_response":
            # A broken or hostile server: these bytes are the whole answer.
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.wfile.write(fault.body or b"")
                self.connection.shutdown(socket.SHUT_WR)
            return None
        headers = [("Retry-After", fault.retry_after)] if fault.retry_after is not None else []
        return Response(fault.status, fault.body or b"", headers)

    # -- responses --------------------------------------------------------------

    def _send(self, response: Response, close: bool = False) -> None:
        """Write status line, headers and body in one write (no Nagle stall)."""
        if close:
            self.close_connection = True
        try:
            phrase = HTTPStatus(response.status).phrase
        except ValueError:
            phrase = "Unknown"
        lines = [f"HTTP/1.1 {response.status} {phrase}",
                 f"Server: {SERVER_NAME}", f"Date: {self.date_time_string()}"]
        if response.content_type:
            lines.append(f"Content-Type: {response.content_type}")
        lines.append(f"Content-Length: {len(response.body)}")
        lines += [f"{name}: {value}" for name, value in response.headers]
        if self.close_connection:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        no_body = self.command == "HEAD" or response.status in (204, 304) or response.status < 200
        self.wfile.write(head if no_body else head + response.body)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # http.server calls this for malformed requests; answer in JSON too.
        status = 405 if code == 501 else int(code)
        text = message or HTTPStatus(status).phrase
        error = ERROR_CODES.get(status, "validation" if status < 500 else "server_error")
        if not hasattr(self, "command") or self.command is None:
            self.command = "GET"
        with contextlib.suppress(OSError):
            self._send(Response(status, error_body(error, text)), close=True)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.dev.verbose:
            sys.stderr.write(f"{self.address_string()} - {format % args}\n")

    # -- config stream ----------------------------------------------------------

    def _run_stream(self, stream: StreamResponse) -> None:
        dev = self.server.dev
        hub = dev.hub
        # The stream body ends when the connection closes.
        self.close_connection = True
        seen = hub.generation(stream.app)  # before reading, so no publish is missed
        current = dev.store.current_config(stream.app)
        with hub.stream():
            self.wfile.write(
                f"HTTP/1.1 200 OK\r\nServer: {SERVER_NAME}\r\nDate: {self.date_time_string()}\r\n"
                "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n".encode("latin-1"))
            last_version = 0
            if current is not None:
                if stream.last_event_id != current[0]:
                    self.wfile.write(sse_event(*current))
                last_version = current[0]
            last_write = time.monotonic()
            while not hub.stopping:
                keepalive_at = last_write + dev.settings.sse_keepalive
                timeout = min(keepalive_at - time.monotonic(), SSE_DISCONNECT_POLL)
                generation, stopping = hub.wait(stream.app, seen, timeout)
                if stopping or self._client_gone():
                    return
                if generation != seen:
                    if generation[0] != seen[0]:
                        last_version = 0  # reset: versions start again from 1
                    seen = generation
                    for version, document in dev.store.configs_after(stream.app, last_version):
                        self.wfile.write(sse_event(version, document))
                        last_version = version
                        last_write = time.monotonic()
                if time.monotonic() >= last_write + dev.settings.sse_keepalive:
                    self.wfile.write(b": keepalive\n\n")
                    last_write = time.monotonic()

    def _send_endless_line(self) -> None:
        """A 200 event stream whose first line never ends: a hostile or broken
        server. Runs until the client closes or the server stops."""
        self.close_connection = True
        chunk = b"x" * 65536
        with contextlib.suppress(OSError):
            self.wfile.write(
                f"HTTP/1.1 200 OK\r\nServer: {SERVER_NAME}\r\nDate: {self.date_time_string()}\r\n"
                "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\ndata: ".encode("latin-1"))
            while not self.server.dev.stopped.is_set():
                self.wfile.write(chunk)

    def _client_gone(self) -> bool:
        """True once the peer closed; an SSE client never sends after its request."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            if isinstance(self.connection, ssl.SSLSocket):
                # A TLS record may be only partly here: never block on it.
                previous = self.connection.gettimeout()
                self.connection.settimeout(0)
                try:
                    return self.connection.recv(4096) == b""
                except ssl.SSLWantReadError:
                    return False
                finally:
                    self.connection.settimeout(previous)
            return self.connection.recv(4096) == b""
        except (OSError, ValueError):
            return True


class _AlreadyAnswered(Exception):
    """Raised after a response went out early (oversized body)."""

    def __init__(self, status: int):
        super().__init__(status)
        self.status = status


class TrackedConnections:
    """Mixin for a socketserver server: remembers open connections so that
    stop() can close them all (SSE streams and proxy tunnels included)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._tracked: set[socket.socket] = set()
        self._tracked_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request(self, request: socket.socket, client_address: Any) -> None:
        with self._tracked_lock:
            self._tracked.add(request)
        super().process_request(request, client_address)  # type: ignore[misc]

    def shutdown_request(self, request: socket.socket) -> None:
        with self._tracked_lock:
            self._tracked.discard(request)
        super().shutdown_request(request)  # type: ignore[misc]

    def close_connections(self) -> None:
        with self._tracked_lock:
            conns = list(self._tracked)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class _HTTPServer(TrackedConnections, http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple, dev: "DevServer"):
        self.dev = dev
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind does a reverse DNS lookup; skip it.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def finish_request(self, request: socket.socket, client_address: Any) -> None:
        # With TLS the handshake runs here, on the connection's own thread, so
        # a slow or refusing client never stalls the accept loop. A client
        # that rejects the certificate ends up in handle_error (an OSError).
        if isinstance(request, ssl.SSLSocket):
            request.settimeout(30)
            request.do_handshake()
            request.settimeout(None)
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (OSError, _AlreadyAnswered)):
            return  # disconnects are routine
        super().handle_error(request, client_address)


# --------------------------------------------------------------------------
# DevServer facade
# --------------------------------------------------------------------------

class DevServer:
    """The development server: storage + endpoints + HTTP listener.

    start() binds and serves on a daemon thread; stop() closes the listener,
    every open connection (SSE streams included) and the database."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, db_path: str | None = None, *,
                 seed_demo: bool = False, events_max_body: int = DEFAULT_EVENTS_MAX_BODY,
                 sse_keepalive: float = DEFAULT_SSE_KEEPALIVE, verbose: bool = False,
                 tls_cert: str | None = None, tls_key: str | None = None):
        self.host = host
        # HTTPS when given a PEM certificate (chain) and its key.
        self.tls_context: ssl.SSLContext | None = None
        if tls_cert or tls_key:
            if not (tls_cert and tls_key):
                raise ApiError(400, "invalid_argument", "--tls-cert and --tls-key go together")
            self.tls_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.tls_context.load_cert_chain(tls_cert, tls_key)
        self.requested_port = port
        self.seed_demo = seed_demo
        self.verbose = verbose
        self._initial_settings = {"events_max_body": events_max_body, "sse_keepalive": sse_keepalive,
                                  "rejected_event_names": []}
        self.settings = Settings()
        self.settings.update(dict(self._initial_settings))
        self.store = Storage(db_path)
        self.hub = ConfigHub()
        self.faults = FaultQueue()
        self.request_log = RequestLog()
        self.stopped = threading.Event()
        self.router = build_router(ApiEndpoints(self), AdminEndpoints(self))
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------

    def start(self) -> "DevServer":
        if self.seed_demo:
            self.store.seed_demo()
        self._httpd = _HTTPServer((self.host, self.requested_port), self)
        if self.tls_context is not None:
            self._httpd.socket = self.tls_context.wrap_socket(self._httpd.socket, server_side=True,
                                                              do_handshake_on_connect=False)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="appnorth-devserver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None or self.stopped.is_set():
            return
        self.stopped.set()
        self.hub.stop()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd.close_connections()
        self._thread.join(timeout=5)
        self.store.close()

    def __enter__(self) -> "DevServer":
        return self.start() if self._httpd is None else self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "https" if self.tls_context is not None else "http"
        return f"{scheme}://{host}:{self.port}"

    # -- admin operations -------------------------------------------------

    def reset(self, seed_demo: bool = False) -> None:
        self.store.reset()
        self.faults.clear()
        self.request_log.clear()
        self.settings.update(dict(self._initial_settings))
        self.hub.reset()
        if seed_demo:
            self.store.seed_demo()



# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------

def write_port_file(path: str, port: int) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(f"{port}\n")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="AppNorth local development API server")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one (default)")
    parser.add_argument("--db", default=None, help="SQLite database file (default: in memory)")
    parser.add_argument("--seed-demo", action="store_true", help="create demo boards and ideas for app 'demo'")
    parser.add_argument("--port-file", default=None, help="write the bound port to this file (atomically)")
    parser.add_argument("--sse-keepalive", type=float, default=DEFAULT_SSE_KEEPALIVE,
                        help="seconds between SSE keepalive comments (default 15)")
    parser.add_argument("--events-max-body", type=int, default=DEFAULT_EVENTS_MAX_BODY,
                        help="max bytes of a POST .../events body (default 1048576)")
    parser.add_argument("--verbose", action="store_true", help="log each request to stderr")
    parser.add_argument("--tls-cert", default=None, help="serve HTTPS with this PEM certificate (chain)")
    parser.add_argument("--tls-key", default=None, help="the PEM private key of --tls-cert")
    args = parser.parse_args(argv)

    try:
        server = DevServer(args.host, args.port, args.db, seed_demo=args.seed_demo,
                           events_max_body=args.events_max_body, sse_keepalive=args.sse_keepalive,
                           verbose=args.verbose, tls_cert=args.tls_cert, tls_key=args.tls_key)
    except ApiError as exc:
        parser.error(exc.message)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server.start()
    if args.port_file:
        write_port_file(args.port_file, server.port)
    print(f"appnorth-devserver listening on {server.url}", flush=True)
    while not stop.wait(0.5):
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
