"""Tests of the AppNorth development server, over real HTTP (http.client and
raw sockets only). One in-process server serves the module; every test starts
from POST /admin/reset."""

from __future__ import annotations

import base64
import contextlib
import gzip
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from appnorth_devserver import DevServer, is_loopback  # noqa: E402

APP = "demo"
API = f"/v1/apps/{APP}"


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

class Reply:
    def __init__(self, status: int, headers: http.client.HTTPMessage, raw: bytes):
        self.status = status
        self.headers = headers
        self.raw = raw
        try:
            self.json = json.loads(raw) if raw else None
        except ValueError:
            self.json = None  # e.g. a deliberately broken raw config or a fault body

    @property
    def error_code(self) -> str:
        return self.json["error"]["code"]

    def __repr__(self) -> str:
        return f"<Reply {self.status} {self.raw[:200]!r}>"


class Client:
    """A keep-alive HTTP/1.1 client for one server."""

    def __init__(self, port: int):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def request(self, method: str, path: str, body=None, headers: dict | None = None,
                key: str | None = None, user: tuple[str, str] | None = None) -> Reply:
        headers = dict(headers or {})
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        if body is not None:
            headers.setdefault("Content-Type", "application/json")
        if key is not None:
            headers["Idempotency-Key"] = key
        if user is not None:
            headers["AppNorth-User-Email"], headers["Authorization"] = user[0], f"Bearer {user[1]}"
        self.conn.request(method, path, body=body, headers=headers)
        resp = self.conn.getresponse()
        raw = resp.read()
        if resp.status != 304 and method != "HEAD":
            assert resp.getheader("Content-Length") == str(len(raw))
            if resp.status != 200 or raw:
                assert resp.getheader("Content-Type") == "application/json"
        return Reply(resp.status, resp.headers, raw)

    def get(self, path, **kw) -> Reply:
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw) -> Reply:
        return self.request("POST", path, body if body is not None else {}, **kw)

    def delete(self, path, **kw) -> Reply:
        return self.request("DELETE", path, **kw)

    def close(self) -> None:
        self.conn.close()


_keys = iter(range(1, 10**9))


def new_key() -> str:
    return f"key-{next(_keys)}"


def raw_exchange(port: int, data: bytes, timeout: float = 5) -> bytes:
    """Send raw bytes, return everything the server sends until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


class Sse:
    """A raw-socket Server-Sent Events client."""

    def __init__(self, port: int, app: str = APP, headers: dict | None = None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self.sock.sendall(f"GET /v1/apps/{app}/config/stream HTTP/1.1\r\nHost: t\r\n"
                          f"Accept: text/event-stream\r\n{extra}\r\n".encode())
        self.file = self.sock.makefile("rb")
        self.status_line = self.file.readline().decode().strip()
        self.headers = {}
        while True:
            line = self.file.readline().decode()
            if line in ("\r\n", ""):
                break
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()

    def block(self) -> list[str]:
        """The next blank-line terminated block of lines."""
        lines = []
        while True:
            line = self.file.readline()
            if not line:
                raise EOFError("stream closed")
            line = line.decode().rstrip("\n")
            if line == "":
                if lines:
                    return lines
                continue
            lines.append(line)

    def event(self) -> dict:
        """The next config event, skipping keepalive comments."""
        while True:
            lines = self.block()
            if lines[0].startswith(":"):
                continue
            fields = {}
            for line in lines:
                name, _, value = line.partition(": ")
                fields[name] = fields[name] + "\n" + value if name in fields else value
            return fields

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def wait_until(predicate, timeout: float = 30.0) -> bool:
    """Polls until `predicate` holds; the timeout only catches a hang."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


# --------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server():
    s = DevServer("127.0.0.1", 0).start()
    yield s
    s.stop()


@pytest.fixture
def c(server):
    client = Client(server.port)
    assert client.post("/admin/reset").status == 200
    yield client
    client.close()


@pytest.fixture
def board(c) -> str:
    return c.post(f"/admin/apps/{APP}/boards", {"name": "Features", "description": "d"}).json["board"]["id"]


@pytest.fixture
def idea(c, board) -> str:
    r = c.post(f"/admin/apps/{APP}/ideas", {"board_id": board, "title": "Dark mode", "body": "b",
                                             "status": "open"})
    return r.json["idea"]["id"]


@pytest.fixture
def alice(c) -> tuple[str, str]:
    assert c.post("/admin/users", {"app": APP, "email": "Alice@Example.com", "token": "tok-a"}).status == 201
    return ("alice@example.com", "tok-a")


@pytest.fixture
def bob(c) -> tuple[str, str]:
    assert c.post("/admin/users", {"app": APP, "email": "bob@example.com", "token": "tok-b"}).status == 201
    return ("bob@example.com", "tok-b")


def state(c, app=APP) -> dict:
    return c.get(f"/admin/apps/{app}/state").json


# --------------------------------------------------------------------------
# Common protocol behaviour
# --------------------------------------------------------------------------

def test_health_and_keep_alive(c):
    r = c.get("/admin/health")
    assert r.status == 200 and r.json["ok"] is True
    sock = c.conn.sock
    for _ in range(5):
        assert c.get(f"{API}/boards").status == 200
    assert c.conn.sock is sock  # one TCP connection served every request


@pytest.mark.parametrize("app", ["bad!app", "a" * 129, "sp%20ace"])
def test_invalid_app_id(c, app):
    r = c.get(f"/v1/apps/{app}/boards")
    assert r.status == 400 and r.error_code == "validation"


def test_longest_app_id_ok(c):
    assert c.get(f"/v1/apps/{'a' * 128}/boards").json == {"boards": []}


def test_unknown_path_and_method(c):
    r = c.get("/v1/nothing")
    assert r.status == 404 and r.error_code == "not_found" and r.json["error"]["message"]
    r = c.request("DELETE", f"{API}/boards")
    assert r.status == 405 and r.error_code == "method_not_allowed"
    assert r.headers["Allow"] == "GET"
    r = c.request("HEAD", f"{API}/boards")
    assert r.status == 405 and r.raw == b""
    assert c.get("/admin/health").status == 200  # still in sync after HEAD


def test_malformed_request_line_gets_json_error(server):
    raw = raw_exchange(server.port, b"GARBAGE\r\n\r\n")
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400")
    assert json.loads(body)["error"]["code"] == "validation"


@pytest.mark.parametrize("body,fragment", [
    (b"{not json", "JSON"),
    (b'{"title": "\xff\xfe"}', "UTF-8"),
    (b"[1, 2]", "object"),
    (b'{"x": NaN}', "JSON"),
    (b'{"x": "\\ud800"}', "surrogate"),
    (b"", "object"),
])
def test_bad_bodies_are_400(c, board, body, fragment):
    r = c.post(f"{API}/ideas", body, key=new_key())
    assert r.status == 400 and r.error_code == "validation"
    assert fragment in r.json["error"]["message"]


def test_invalid_content_length(server):
    raw = raw_exchange(server.port, f"POST {API}/ideas HTTP/1.1\r\nHost: t\r\nContent-Length: -5\r\n\r\n".encode())
    assert raw.startswith(b"HTTP/1.1 400") and b'"validation"' in raw


def test_chunked_request_body(c, server, board):
    body = json.dumps({"board_id": board, "title": "Chunky"}).encode()
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 7]), body[i:i + 7]) for i in range(0, len(body), 7))
    req = (f"POST {API}/ideas HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
           f"Idempotency-Key: chunk-1\r\nConnection: close\r\n\r\n").encode() + chunks + b"0\r\n\r\n"
    raw = raw_exchange(server.port, req)
    assert raw.startswith(b"HTTP/1.1 201"), raw
    assert [i["title"] for i in state(c)["ideas"]] == ["Chunky"]


def test_oversized_body_rejected_without_reading_it(server):
    size = 10 * 1024 * 1024 + 1
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(f"POST {API}/feedback HTTP/1.1\r\nHost: t\r\nContent-Length: {size}\r\n\r\n".encode())
        s.sendall(b"x" * 1000)  # only a sliver of the declared body
        raw = b""
        while not raw.endswith(b"}"):
            chunk = s.recv(65536)
            assert chunk, raw
            raw += chunk
    assert raw.startswith(b"HTTP/1.1 413")
    assert b"Connection: close" in raw and b'"payload_too_large"' in raw


def test_oversized_body_with_expect_100_continue(server):
    size = 10 * 1024 * 1024 + 1
    raw = raw_exchange(server.port, (f"POST {API}/feedback HTTP/1.1\r\nHost: t\r\nContent-Length: {size}\r\n"
                                     "Expect: 100-continue\r\n\r\n").encode())
    assert raw.startswith(b"HTTP/1.1 413") and b"100 Continue" not in raw


def test_expect_100_continue_normal_body(c, server, board):
    body = json.dumps({"board_id": board, "title": "Expect"}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall((f"POST {API}/ideas HTTP/1.1\r\nHost: t\r\nContent-Length: {len(body)}\r\n"
                   "Idempotency-Key: e-1\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n").encode())
        assert s.recv(100).startswith(b"HTTP/1.1 100 Continue")
        s.sendall(body)
        raw = b""
        while chunk := s.recv(65536):
            raw += chunk
    assert b"HTTP/1.1 201" in raw


# --------------------------------------------------------------------------
# Identity
# --------------------------------------------------------------------------

def test_identity_rules(c, alice, board):
    r = c.post(f"{API}/ideas", {"board_id": board, "title": "t", "body": ""}, key=new_key(), user=alice)
    assert r.status == 201 and r.json["idea"]["author"] == "alice@example.com"
    # email compared case-insensitively, token exactly
    r = c.get(f"{API}/boards", headers={"AppNorth-User-Email": "ALICE@example.COM", "Authorization": "Bearer tok-a"})
    assert r.status == 200
    for headers in (
        {"Authorization": "Bearer tok-a"},                                       # token only
        {"AppNorth-User-Email": "alice@example.com"},                            # email only
        {"AppNorth-User-Email": "alice@example.com", "Authorization": "Bearer TOK-A"},
        {"AppNorth-User-Email": "mallory@example.com", "Authorization": "Bearer tok-a"},
        {"AppNorth-User-Email": "alice@example.com", "Authorization": "Basic tok-a"},
    ):
        r = c.get(f"{API}/boards", headers=headers)
        assert r.status == 401 and r.error_code == "unauthorized", headers
    # credentials are per app
    r = c.get("/v1/apps/other/boards", user=alice)
    assert r.status == 401
    # anonymous is fine
    r = c.post(f"{API}/ideas", {"board_id": board, "title": "t2", "body": ""}, key=new_key())
    assert r.json["idea"]["author"] == "anonymous"


def test_reregistering_user_replaces_token(c, alice):
    c.post("/admin/users", {"app": APP, "email": "alice@example.com", "token": "tok-new"})
    assert c.get(f"{API}/boards", user=alice).status == 401
    assert c.get(f"{API}/boards", user=("alice@example.com", "tok-new")).status == 200


# --------------------------------------------------------------------------
# Reads
# --------------------------------------------------------------------------

def test_boards_in_created_order_and_partitioned(c):
    for name in ("One", "Two", "Three"):
        assert c.post(f"/admin/apps/{APP}/boards", {"name": name, "description": name.lower()}).status == 201
    boards = c.get(f"{API}/boards").json["boards"]
    assert [b["name"] for b in boards] == ["One", "Two", "Three"]
    assert set(boards[0]) == {"id", "name", "description", "created_at"}
    assert isinstance(boards[0]["created_at"], int) and isinstance(boards[0]["id"], str)
    assert c.get("/v1/apps/other/boards").json == {"boards": []}


def test_ideas_filters(c, board):
    other = c.post(f"/admin/apps/{APP}/boards", {"name": "Bugs", "description": ""}).json["board"]["id"]
    specs = [(board, "Dark mode", "night theme", "planned"), (board, "Offline sync", "works on a plane", "open"),
             (other, "Crash on login", "DARK screen", "done"), (board, "Éclair support", "", "open")]
    for b, title, body, status in specs:
        c.post(f"/admin/apps/{APP}/ideas", {"board_id": b, "title": title, "body": body, "status": status})

    def titles(query):
        r = c.get(f"{API}/ideas?{query}")
        assert r.status == 200, r
        return [i["title"] for i in r.json["ideas"]]

    assert titles("") == ["Dark mode", "Offline sync", "Crash on login", "Éclair support"]
    assert titles(f"board={board}") == ["Dark mode", "Offline sync", "Éclair support"]
    assert titles("q=dark") == ["Dark mode", "Crash on login"]          # title or body, any case
    assert titles(f"q=dark&board={other}") == ["Crash on login"]
    assert titles("q=%C3%A9CLAIR") == ["Éclair support"]                # Unicode case folding
    assert titles("status=open") == ["Offline sync", "Éclair support"]
    idea = c.get(f"{API}/ideas?q=offline").json["ideas"][0]
    assert set(idea) == {"id", "board_id", "title", "body", "status", "votes", "comment_count",
                         "author", "created_at"}
    assert idea["board_id"] == board


@pytest.mark.parametrize("query,status", [
    ("status=closed", 400), ("limit=0", 400), ("limit=101", 400), ("limit=abc", 400),
    ("cursor=nope", 400), ("cursor=djE6eA", 400), ("board=b_999999", 404), ("board=zzz", 404),
])
def test_ideas_bad_queries(c, board, query, status):
    r = c.get(f"{API}/ideas?{query}")
    assert r.status == status
    assert r.error_code == ("validation" if status == 400 else "not_found")


def test_ideas_pagination(c, board):
    for n in range(7):
        c.post(f"/admin/apps/{APP}/ideas", {"board_id": board, "title": f"Idea {n}", "body": "", "status": "open"})
    assert len(c.get(f"{API}/ideas").json["ideas"]) == 7  # default limit 20
    seen, cursor, pages = [], None, 0
    while True:
        r = c.get(f"{API}/ideas?limit=3" + (f"&cursor={cursor}" if cursor else ""))
        assert r.status == 200
        seen += [i["title"] for i in r.json["ideas"]]
        pages += 1
        cursor = r.json["next_cursor"]
        if cursor is None:
            break
        assert isinstance(cursor, str)
    assert pages == 3 and seen == [f"Idea {n}" for n in range(7)]
    assert c.get(f"{API}/ideas?limit=100").json["next_cursor"] is None


def test_comments_flow(c, idea):
    r = c.post(f"{API}/ideas/{idea}/comments", {"body": "Yes please"}, key=new_key())
    assert r.status == 201
    comment = r.json["comment"]
    assert set(comment) == {"id", "idea_id", "body", "author", "created_at"}
    assert comment["idea_id"] == idea and comment["author"] == "anonymous"
    c.post(f"{API}/ideas/{idea}/comments", {"body": "Second"}, key=new_key())
    listed = c.get(f"{API}/ideas/{idea}/comments").json["comments"]
    assert [x["body"] for x in listed] == ["Yes please", "Second"]
    assert c.get(f"{API}/ideas").json["ideas"][0]["comment_count"] == 2


@pytest.mark.parametrize("body", [{"body": "   \n\t"}, {"body": ""}, {}, {"body": 5}, {"body": "x" * 10001}])
def test_comment_validation(c, idea, body):
    r = c.post(f"{API}/ideas/{idea}/comments", body, key=new_key())
    assert r.status == 400 and r.error_code == "validation"


def test_comment_longest_body_ok(c, idea):
    assert c.post(f"{API}/ideas/{idea}/comments", {"body": "x" * 10000}, key=new_key()).status == 201


def test_comments_unknown_idea(c, idea):
    for path in (f"{API}/ideas/i_999999/comments", f"{API}/ideas/bogus/comments"):
        assert c.get(path).status == 404
        r = c.post(path, {"body": "hi"}, key=new_key())
        assert r.status == 404 and r.error_code == "not_found"
    # ideas are partitioned by app too
    assert c.get(f"/v1/apps/other/ideas/{idea}/comments").status == 404


def test_chat_messages_visible_to_own_identity(c, alice, bob):
    assert c.post(f"{API}/chat/messages", {"body": "anon hi"}, key=new_key()).status == 201
    r = c.post(f"{API}/chat/messages", {"body": "alice hi"}, key=new_key(), user=alice)
    assert r.status == 201
    assert set(r.json["message"]) == {"id", "body", "author", "created_at"}
    c.post(f"{API}/chat/messages", {"body": "bob hi"}, key=new_key(), user=bob)
    assert [m["body"] for m in c.get(f"{API}/chat/messages", user=alice).json["messages"]] == ["alice hi"]
    assert [m["body"] for m in c.get(f"{API}/chat/messages").json["messages"]] == ["anon hi"]
    assert c.post(f"{API}/chat/messages", {"body": "x" * 4001}, key=new_key()).status == 400
    assert c.post(f"{API}/chat/messages", {"body": ""}, key=new_key()).status == 400
    assert c.post(f"{API}/chat/messages", {"body": "x" * 4000}, key=new_key()).status == 201


# --------------------------------------------------------------------------
# Writes
# --------------------------------------------------------------------------

def test_create_idea(c, board):
    r = c.post(f"{API}/ideas", {"board_id": board, "title": "Widgets", "body": "Home screen"}, key=new_key())
    assert r.status == 201
    idea = r.json["idea"]
    assert idea["title"] == "Widgets" and idea["status"] == "open" and idea["votes"] == 0
    assert idea["comment_count"] == 0 and idea["board_id"] == board
    assert c.get(f"{API}/ideas").json["ideas"] == [idea]


@pytest.mark.parametrize("body", [
    {"title": "no board", "body": ""}, {"board_id": "B", "body": ""}, {"board_id": "B", "title": ""},
    {"board_id": "B", "title": "x" * 201}, {"board_id": "B", "title": 7}, {"board_id": "B", "title": "t", "body": "x" * 10001},
])
def test_create_idea_validation(c, board, body):
    if body.get("board_id") == "B":
        body["board_id"] = board
    r = c.post(f"{API}/ideas", body, key=new_key())
    assert r.status == 400 and r.error_code == "validation"


def test_create_idea_unknown_board(c, board):
    r = c.post(f"{API}/ideas", {"board_id": "b_999999", "title": "t", "body": ""}, key=new_key())
    assert r.status == 404 and r.error_code == "not_found"


@pytest.mark.parametrize("key", [None, "", "k" * 256, "caf\u00e9", "tab\tkey"])
def test_writes_require_valid_idempotency_key(c, board, key):
    headers = {} if key is None else {"Idempotency-Key": key}
    r = c.post(f"{API}/ideas", {"board_id": board, "title": "t", "body": ""}, headers=headers)
    assert r.status == 400 and "Idempotency-Key" in r.json["error"]["message"]


def test_longest_idempotency_key_ok(c, board):
    assert c.post(f"{API}/ideas", {"board_id": board, "title": "t", "body": ""}, key="k" * 255).status == 201


def test_feedback(c, alice):
    png = base64.b64encode(b"\x89PNG" + b"\0" * 100).decode()
    jpg = base64.b64encode(b"\xff\xd8" + b"\1" * 50).decode()
    body = {"text": "It crashed", "diagnostics": {"os": "linux", "mem": 12.5},
            "screenshots": [{"content_type": "image/png", "data_base64": png},
                            {"content_type": "image/jpeg", "data_base64": jpg}]}
    r = c.post(f"{API}/feedback", body, key=new_key(), user=alice)
    assert r.status == 201
    fb = r.json["feedback"]
    assert {k: fb[k] for k in ("text", "diagnostics", "screenshot_count", "author")} == {
        "text": "It crashed", "diagnostics": {"os": "linux", "mem": 12.5}, "screenshot_count": 2,
        "author": "alice@example.com"}
    assert fb["id"] and isinstance(fb["created_at"], int)
    stored = state(c)["feedback"][0]
    assert stored["screenshots"] == [{"content_type": "image/png", "size": 104},
                                     {"content_type": "image/jpeg", "size": 52}]
    # optional parts default
    r = c.post(f"{API}/feedback", {"text": "plain"}, key=new_key())
    assert r.json["feedback"]["diagnostics"] == {} and r.json["feedback"]["screenshot_count"] == 0


def _shot(data: bytes = b"img", content_type: str = "image/png") -> dict:
    return {"content_type": content_type, "data_base64": base64.b64encode(data).decode()}


@pytest.mark.parametrize("body", [
    {"text": ""}, {"text": "x" * 20001}, {}, {"text": "t", "diagnostics": [1]},
    {"text": "t", "screenshots": [_shot()] * 6},
    {"text": "t", "screenshots": [{"content_type": "image/png", "data_base64": "!!not base64!!"}]},
    {"text": "t", "screenshots": [_shot(content_type="image/gif")]},
    {"text": "t", "screenshots": [_shot(b"x" * (2 * 1024 * 1024 + 1))]},
    {"text": "t", "screenshots": "nope"}, {"text": "t", "screenshots": [{"content_type": "image/png"}]},
])
def test_feedback_validation(c, body):
    r = c.post(f"{API}/feedback", body, key=new_key())
    assert r.status == 400 and r.error_code == "validation"
    assert state(c)["feedback"] == []


def test_feedback_limits_inclusive(c):
    body = {"text": "x" * 20000, "screenshots": [_shot(b"x" * (2 * 1024 * 1024))] + [_shot()] * 4}
    r = c.post(f"{API}/feedback", body, key=new_key())
    assert r.status == 201 and r.json["feedback"]["screenshot_count"] == 5


def test_votes(c, idea, alice):
    key = new_key()
    r = c.post(f"{API}/ideas/{idea}/votes", {}, key=key)
    assert r.status == 201 and r.json == {"vote": {"idea_id": idea, "votes": 1}}
    replay = c.post(f"{API}/ideas/{idea}/votes", {}, key=key)
    assert replay.status == 201 and replay.raw == r.raw and replay.headers["Idempotent-Replayed"] == "true"
    again = c.post(f"{API}/ideas/{idea}/votes", {}, key=new_key())
    assert again.status == 409 and again.error_code == "already_voted"
    r = c.request("POST", f"{API}/ideas/{idea}/votes", key=new_key(), user=alice)  # no body at all
    assert r.status == 201 and r.json["vote"]["votes"] == 2
    assert c.get(f"{API}/ideas").json["ideas"][0]["votes"] == 2
    assert c.post(f"{API}/ideas/i_999999/votes", {}, key=new_key()).status == 404
    assert [v["identity"] for v in state(c)["votes"]] == ["anonymous", "alice@example.com"]


# --------------------------------------------------------------------------
# Idempotency
# --------------------------------------------------------------------------

def test_idempotent_replay_is_exact_and_single_write(c, board):
    body = {"board_id": board, "title": "Once", "body": "only once"}
    first = c.post(f"{API}/ideas", body, key="same")
    assert first.status == 201 and "Idempotent-Replayed" not in first.headers
    # same JSON, other key order and spacing: still the same request
    respelled = '{ "body" : "only once", "title":"Once", "board_id": "%s" }' % board
    for payload in (body, respelled):
        r = c.post(f"{API}/ideas", payload, key="same")
        assert r.status == 201 and r.raw == first.raw and r.headers["Idempotent-Replayed"] == "true"
    assert len(state(c)["ideas"]) == 1


def test_idempotency_conflicts(c, board, idea):
    assert c.post(f"{API}/ideas", {"board_id": board, "title": "A", "body": ""}, key="k").status == 201
    r = c.post(f"{API}/ideas", {"board_id": board, "title": "B", "body": ""}, key="k")
    assert r.status == 409 and r.error_code == "idempotency_conflict"
    r = c.post(f"{API}/ideas/{idea}/comments", {"body": "x"}, key="k")
    assert r.status == 409 and r.error_code == "idempotency_conflict"
    assert len(state(c)["ideas"]) == 2 and state(c)["comments"] == []


def test_idempotency_scoped_per_identity(c, board, alice, bob):
    body = {"board_id": board, "title": "Mine", "body": ""}
    for user in (None, alice, bob):
        r = c.post(f"{API}/ideas", body, key="shared-key", user=user)
        assert r.status == 201 and "Idempotent-Replayed" not in r.headers
    assert sorted(i["author"] for i in state(c)["ideas"]) == ["alice@example.com", "anonymous", "bob@example.com"]


def test_errors_are_not_stored(c, board):
    r = c.post(f"{API}/ideas", {"board_id": board, "body": ""}, key="retry")
    assert r.status == 400
    r = c.post(f"{API}/ideas", {"board_id": board, "title": "Fixed", "body": ""}, key="retry")
    assert r.status == 201 and "Idempotent-Replayed" not in r.headers


def test_retry_after_injected_5xx_succeeds_once(c, board):
    c.post("/admin/faults", {"path_prefix": f"{API}/ideas", "method": "POST", "status": 503})
    body = {"board_id": board, "title": "Eventually", "body": ""}
    r = c.post(f"{API}/ideas", body, key="k5")
    assert r.status == 503 and r.error_code == "injected"
    r = c.post(f"{API}/ideas", body, key="k5")
    assert r.status == 201 and "Idempotent-Replayed" not in r.headers
    assert c.post(f"{API}/ideas", body, key="k5").headers["Idempotent-Replayed"] == "true"
    assert len(state(c)["ideas"]) == 1


def test_concurrent_same_key_writes_once(c, server, board):
    body = {"board_id": board, "title": "Race", "body": ""}
    results = []

    def worker():
        client = Client(server.port)
        results.append(client.post(f"{API}/ideas", body, key="race"))
        client.close()

    threads = [threading.Thread(target=worker) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.status for r in results] == [201] * 10
    assert len({r.raw for r in results}) == 1
    assert sum(1 for r in results if "Idempotent-Replayed" in r.headers) == 9
    assert len(state(c)["ideas"]) == 1


# --------------------------------------------------------------------------
# Config and SSE
# --------------------------------------------------------------------------

def publish(c, config=None, raw=None, app=APP) -> int:
    body = {"raw": raw} if raw is not None else {"config": config}
    r = c.post(f"/admin/apps/{app}/config", body)
    assert r.status == 201, r
    return r.json["version"]


def test_config_etag(c):
    r = c.get(f"{API}/config")
    assert r.status == 404 and r.error_code == "not_found"
    assert publish(c, {"theme": "dark", "price": 9.99}) == 1
    r = c.get(f"{API}/config")
    assert r.status == 200 and r.headers["ETag"] == '"1"'
    assert r.raw == b'{"version":1,"config":{"theme": "dark", "price": 9.99}}'
    r = c.get(f"{API}/config", headers={"If-None-Match": '"1"'})
    assert r.status == 304 and r.raw == b"" and r.headers["ETag"] == '"1"'
    assert publish(c, {"theme": "light"}) == 2
    r = c.get(f"{API}/config", headers={"If-None-Match": '"1"'})
    assert r.status == 200 and r.json == {"version": 2, "config": {"theme": "light"}}
    assert c.get("/v1/apps/other/config").status == 404  # partitioned
    assert c.get(f"{API}/config").status == 200          # connection still in sync after 304


def test_config_keeps_text_on_one_line(c):
    c.request("POST", f"/admin/apps/{APP}/config", '{"config": {\n  "n": 1.50,\n  "s": "a b"\n}}')
    r = c.get(f"{API}/config")
    assert b"\n" not in r.raw and b"1.50" in r.raw and r.json["config"] == {"n": 1.5, "s": "a b"}


def test_config_raw_payload(c):
    publish(c, raw='{"broken": ')
    r = c.get(f"{API}/config")
    assert r.status == 200 and r.raw == b'{"version":1,"config":{"broken": }'
    st = state(c)
    assert st["config"] is None and st["config_raw"] == '{"broken": ' and st["config_version"] == 1


@pytest.mark.parametrize("body", [{}, {"config": [1]}, {"raw": 5}, {"config": {}, "raw": "x"}])
def test_config_publish_validation(c, body):
    assert c.post(f"/admin/apps/{APP}/config", body).status == 400


def test_sse_initial_event_and_live_updates(c, server):
    publish(c, {"v": 1})
    publish(c, {"v": 2})
    stream = Sse(server.port)
    try:
        assert stream.status_line == "HTTP/1.1 200 OK"
        assert stream.headers["content-type"] == "text/event-stream"
        assert stream.headers["cache-control"] == "no-cache"
        assert "content-length" not in stream.headers
        assert stream.block() == ["id: 2", "event: config", 'data: {"version":2,"config":{"v": 2}}']
        publish(c, {"v": 3})
        publish(c, {"v": 4})
        assert [stream.event()["id"] for _ in range(2)] == ["3", "4"]  # one event per version
    finally:
        stream.close()


def test_sse_a_publish_wakes_the_stream(c, server):
    # No keepalive is due for an hour: only the publish can put each event
    # on the stream (the socket's 5 s timeout catches a stream never woken).
    c.post("/admin/settings", {"sse_keepalive": 3600})
    stream = Sse(server.port)
    try:
        for n in range(5):
            publish(c, {"n": n})
            event = stream.event()
            assert json.loads(event["data"]) == {"version": n + 1, "config": {"n": n}}
    finally:
        stream.close()


def test_sse_last_event_id_skips_initial_event(c, server):
    publish(c, {"v": 1})
    c.post("/admin/settings", {"sse_keepalive": 0.05})
    stream = Sse(server.port, headers={"Last-Event-ID": "1"})
    try:
        assert stream.block() == [": keepalive"]  # no initial event
        publish(c, {"v": 2})
        assert stream.event()["id"] == "2"
    finally:
        stream.close()
    stream = Sse(server.port, headers={"Last-Event-ID": "1"})  # behind: gets the current version
    try:
        assert stream.event()["id"] == "2"
    finally:
        stream.close()


def test_sse_keepalive_interval(c, server):
    c.post("/admin/settings", {"sse_keepalive": 0.05})
    stream = Sse(server.port)
    try:
        t0 = time.monotonic()
        assert [stream.block() for _ in range(3)] == [[": keepalive"]] * 3
        assert time.monotonic() - t0 >= 0.1  # three intervals at least; a stall ends at the socket timeout
    finally:
        stream.close()


def test_sse_raw_payload_and_reset(c, server):
    stream = Sse(server.port)
    try:
        publish(c, raw="not json")
        assert stream.event()["data"] == '{"version":1,"config":not json}'
        c.post("/admin/reset")
        publish(c, {"after": "reset"})  # versions restart at 1 and still reach the stream
        event = stream.event()
        assert event["id"] == "1" and json.loads(event["data"])["config"] == {"after": "reset"}
    finally:
        stream.close()


def test_sse_handler_exits_on_client_disconnect(c, server):
    stream = Sse(server.port)
    assert wait_until(lambda: c.get("/admin/health").json["sse_streams"] == 1)
    stream.close()
    assert wait_until(lambda: c.get("/admin/health").json["sse_streams"] == 0)


def test_stop_does_not_hang_on_open_streams():
    s = DevServer("127.0.0.1", 0).start()
    Client(s.port).post(f"/admin/apps/{APP}/config", {"config": {"a": 1}})
    streams = [Sse(s.port) for _ in range(3)]
    idle = Client(s.port)
    assert idle.get("/admin/health").status == 200  # an idle keep-alive connection too
    for st in streams:
        st.event()
    stopper = threading.Thread(target=s.stop, daemon=True)
    stopper.start()
    stopper.join(60)  # a watchdog only: stop() closes the streams, it does not wait them out
    assert not stopper.is_alive(), "stop() hung on the open streams"
    for st in streams:
        with pytest.raises((EOFError, ConnectionError)):
            st.block()
        st.close()
    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        idle.get("/admin/health")


# --------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------

def ev(i, **extra) -> dict:
    return {"id": f"e{i}", "name": "screen_view", "timestamp": 1700000000000 + i,
            "anonymous_id": "anon-1", **extra}


def test_events_accept_and_dedup(c, alice):
    r = c.post(f"{API}/events", {"events": [ev(1, properties={"a": 1}), ev(2, user_id="u1", session_id="s1")]},
               user=alice)
    assert r.status == 200 and r.json == {"accepted": 2, "duplicates": 0}
    r = c.post(f"{API}/events", {"events": [ev(2), ev(3), ev(3)]})
    assert r.json == {"accepted": 1, "duplicates": 2}
    events = state(c)["events"]
    assert [e["id"] for e in events] == ["e1", "e2", "e3"]
    e2 = events[1]
    assert (e2["user_id"], e2["session_id"], e2["identity"]) == ("u1", "s1", "alice@example.com")
    assert e2["properties"] == {} and e2["properties_raw"] is None
    # dedup is per app
    assert c.post("/v1/apps/other/events", {"events": [ev(1)]}).json == {"accepted": 1, "duplicates": 0}


def gzipped(obj) -> bytes:
    return gzip.compress(json.dumps(obj).encode())


def test_gzip_event_batch_is_decoded_stored_and_logged(c):
    body = gzipped({"events": [ev(i, properties={"screen": "home"}) for i in range(50)]})
    r = c.post(f"{API}/events", body, headers={"Content-Encoding": "gzip"})
    assert r.status == 200 and r.json == {"accepted": 50, "duplicates": 0}
    assert len(state(c)["events"]) == 50
    entry = c.get("/admin/requests").json["requests"][-1]
    assert entry["content_encoding"] == "gzip" and entry["wire_size"] == len(body)
    assert entry["body_size"] > 3 * entry["wire_size"]  # the decoded size
    # the same batch again, uncompressed: every event is a duplicate
    assert c.post(f"{API}/events", {"events": [ev(i) for i in range(50)]}).json == {"accepted": 0, "duplicates": 50}
    plain = c.get("/admin/requests").json["requests"][-1]
    assert plain["content_encoding"] == "identity" and plain["wire_size"] == plain["body_size"]


def test_gzip_write_body_is_decoded(c, idea):
    body = gzipped({"body": "x" * 3000})
    r = c.post(f"{API}/ideas/{idea}/comments", body, headers={"Content-Encoding": "gzip"}, key=new_key())
    assert r.status == 201 and r.json["comment"]["body"] == "x" * 3000


@pytest.mark.parametrize("wire", [b"not gzip at all", gzip.compress(b'{"events": []}', mtime=0)[:-6],
                                  gzip.compress(b'{"events": []}', mtime=0) + b"trailing"],
                         ids=["not gzip", "truncated", "trailing bytes"])  # the same ids in every xdist worker
def test_corrupt_gzip_body_is_400_and_stores_nothing(c, wire):
    r = c.post(f"{API}/events", wire, headers={"Content-Encoding": "gzip"})
    assert r.status == 400 and r.error_code == "validation" and "gzip" in r.json["error"]["message"]
    assert state(c)["events"] == []
    assert c.get("/admin/requests").json["requests"][-1]["status"] == 400
    # the connection is still usable
    assert c.post(f"{API}/events", {"events": [ev(1)]}).status == 200


def test_gzip_decoded_size_obeys_the_events_limit(c):
    c.post("/admin/settings", {"events_max_body": 4096})
    bomb = gzip.compress(json.dumps({"events": [ev(1, properties={"pad": "x" * 100_000})]}).encode())
    assert len(bomb) < 4096
    r = c.post(f"{API}/events", bomb, headers={"Content-Encoding": "gzip"})
    assert r.status == 413 and r.error_code == "payload_too_large"
    assert state(c)["events"] == []


def test_gzip_refused_with_415_when_the_setting_is_off_and_other_encodings_always(c):
    c.post("/admin/settings", {"accept_gzip": False})
    r = c.post(f"{API}/events", gzipped({"events": [ev(1)]}), headers={"Content-Encoding": "gzip"})
    assert r.status == 415 and r.error_code == "unsupported_media_type"
    assert state(c)["events"] == []
    entry = c.get("/admin/requests").json["requests"][-1]
    assert (entry["status"], entry["content_encoding"]) == (415, "gzip")
    assert c.post(f"{API}/events", {"events": [ev(1)]}).status == 200  # identity still works
    c.post("/admin/settings", {"accept_gzip": True})
    r = c.post(f"{API}/events", b"xx", headers={"Content-Encoding": "br"})
    assert r.status == 415


def test_gzip_responses_setting_compresses_for_clients_that_accept_gzip(c, board):
    c.post("/admin/settings", {"gzip_responses": True})
    conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=10)
    try:
        conn.request("GET", f"{API}/boards", headers={"Accept-Encoding": "gzip"})
        resp = conn.getresponse()
        raw = resp.read()
        assert resp.getheader("Content-Encoding") == "gzip" and resp.getheader("Content-Length") == str(len(raw))
        assert json.loads(gzip.decompress(raw))["boards"][0]["id"] == board
        conn.request("GET", f"{API}/boards")  # no Accept-Encoding: identity
        resp = conn.getresponse()
        assert resp.getheader("Content-Encoding") is None and json.loads(resp.read())["boards"]
    finally:
        conn.close()


def test_events_keep_raw_property_text(c):
    body = ('{"events": [{"id": "p1", "name": "purchase", "timestamp": 1, "anonymous_id": "a", '
            '"properties": {"price": 9.99, "big": 1.0E2, "name": "caf\\u00e9",\n "nested": {"x": [1, 2.50]}}}]}')
    assert c.request("POST", f"{API}/events", body).json == {"accepted": 1, "duplicates": 0}
    stored = state(c)["events"][0]
    assert stored["properties_raw"] == ('{"price": 9.99, "big": 1.0E2, "name": "caf\\u00e9",\n '
                                        '"nested": {"x": [1, 2.50]}}')
    assert stored["properties"] == {"price": 9.99, "big": 100.0, "name": "café", "nested": {"x": [1, 2.5]}}


@pytest.mark.parametrize("events", [
    [], [ev(i) for i in range(1001)], "nope", [ev(1), {**ev(2), "name": ""}], [{**ev(1), "id": "x" * 65}],
    [{**ev(1), "name": "n" * 257}], [{**ev(1), "timestamp": 1.5}], [{**ev(1), "timestamp": True}],
    [{**ev(1), "timestamp": "1"}], [{**ev(1), "properties": [1]}], [{**ev(1), "user_id": 5}],
    [{k: v for k, v in ev(1).items() if k != "anonymous_id"}], [5],
])
def test_events_invalid_batch_stores_nothing(c, events):
    r = c.post(f"{API}/events", {"events": events})
    assert r.status == 400 and r.error_code == "validation"
    assert state(c)["events"] == []


def test_events_invalid_events_with_ids_are_listed(c):
    r = c.post(f"{API}/events", {"events": [ev(1), {**ev(2), "timestamp": 1.5}, ev(3), {**ev(4), "name": ""}]})
    assert r.status == 400 and r.error_code == "validation"
    rejected = r.json["error"]["rejected"]
    assert [x["id"] for x in rejected] == ["e2", "e4"]
    assert "timestamp" in rejected[0]["message"] and "name" in rejected[1]["message"]
    assert state(c)["events"] == []  # all or nothing: the client resends the rest
    assert c.post(f"{API}/events", {"events": [ev(1), ev(3)]}).json == {"accepted": 2, "duplicates": 0}


def test_events_invalid_event_without_readable_id_fails_the_batch_unlisted(c):
    r = c.post(f"{API}/events", {"events": [ev(1), {**ev(2), "id": 7}, {**ev(3), "timestamp": "x"}]})
    assert r.status == 400 and "rejected" not in r.json["error"]
    assert state(c)["events"] == []


def test_events_names_refused_by_schema_are_listed_with_422(c):
    r = c.post("/admin/settings", {"rejected_event_names": ["legacy_tap"]})
    assert r.json["settings"]["rejected_event_names"] == ["legacy_tap"]
    r = c.post(f"{API}/events", {"events": [ev(1), {**ev(2), "name": "legacy_tap"}, ev(3)]})
    assert r.status == 422 and r.error_code == "validation"
    assert r.json["error"]["rejected"] == [{"id": "e2", "message": "event name 'legacy_tap' is refused by the app's schema"}]
    assert state(c)["events"] == []
    c.post("/admin/reset")
    assert c.get("/admin/settings").json["settings"]["rejected_event_names"] == []
    assert c.post(f"{API}/events", {"events": [{**ev(2), "name": "legacy_tap"}]}).status == 200


def test_poisoned_event_names_fail_the_batch_naming_no_event(c):
    c.post("/admin/settings", {"poisoned_event_names": ["poison"]})
    try:
        bad = dict(ev(2), name="poison")
        r = c.post(f"{API}/events", {"events": [ev(1), bad]})
        assert r.status == 400 and "rejected" not in r.json["error"]
    finally:
        c.post("/admin/settings", {"poisoned_event_names": []})


@pytest.mark.parametrize("names", ["x", [""], [5], ["n" * 257], ["a"] * 101])
def test_rejected_event_names_setting_is_checked(c, names):
    assert c.post("/admin/settings", {"rejected_event_names": names}).status == 400


def test_events_batch_limits_inclusive(c):
    r = c.post(f"{API}/events", {"events": [ev(i) for i in range(1000)]})
    assert r.json == {"accepted": 1000, "duplicates": 0}
    assert c.post(f"{API}/events", {"events": [{**ev(5000), "id": "x" * 64, "user_id": None}]}).status == 200


def test_events_body_limit(c):
    c.post("/admin/settings", {"events_max_body": 300})
    small = {"events": [ev(1)]}
    assert c.post(f"{API}/events", small).status == 200
    big = {"events": [ev(i) for i in range(10)]}
    r = c.post(f"{API}/events", big)
    assert r.status == 413 and r.error_code == "payload_too_large"
    assert r.headers["Connection"] == "close"
    assert len(state(c)["events"]) == 1
    # the default limit is 1 MiB
    c.post("/admin/reset")
    padding = "x" * (1024 * 1024)
    r = Client(c.port).post(f"{API}/events", {"events": [ev(1, properties={"pad": padding})]})
    assert r.status == 413


# --------------------------------------------------------------------------
# Faults
# --------------------------------------------------------------------------

def test_fault_status_with_retry_after_and_count(c):
    r = c.post("/admin/faults", {"status": 503, "retry_after": "2", "count": 2})
    assert r.status == 201 and r.json["id"]
    for _ in range(2):
        r = c.get(f"{API}/boards")
        assert r.status == 503 and r.headers["Retry-After"] == "2" and r.error_code == "injected"
    assert c.get(f"{API}/boards").status == 200
    assert c.get("/admin/faults").json["faults"] == []


def test_fault_window_serves_every_match_until_it_ends(c):
    started = time.monotonic()  # before the window opens, which is when the fault is armed
    r = c.post("/admin/faults", {"path_prefix": f"{API}/boards", "status": 503, "retry_after": "1", "for_ms": 3000})
    assert r.status == 201 and r.json["fault"]["for_ms"] == 3000
    assert [c.get(f"{API}/boards").status for _ in range(3)] == [503, 503, 503]  # a count would stop at 1
    assert wait_until(lambda: c.get(f"{API}/boards").status == 200, timeout=10)
    assert time.monotonic() - started >= 3.0
    assert c.get("/admin/faults").json["faults"] == []
    log = c.get("/admin/requests").json["requests"]
    assert log[0]["status"] == 503 and log[0]["retry_after"] == "1"
    assert all(a["mono_ms"] < b["mono_ms"] for a, b in zip(log, log[1:]))
    assert log[-1]["status"] == 200 and "retry_after" not in log[-1]


@pytest.mark.parametrize("spec", [{"status": 503, "for_ms": 0}, {"status": 503, "for_ms": "1"},
                                  {"status": 503, "for_ms": True}, {"status": 503, "for_ms": 3_600_001}])
def test_fault_window_validation(c, spec):
    assert c.post("/admin/faults", spec).status == 400


def test_events_log_counts_accepted_and_resent_copies(c):
    c.post(f"{API}/events", {"events": [ev(1), ev(2)]})
    c.post(f"{API}/events", {"events": [ev(2), ev(3)]})
    posts = [e for e in c.get("/admin/requests").json["requests"] if e["path"] == f"{API}/events"]
    assert [(e["events_accepted"], e["events_duplicates"]) for e in posts] == [(2, 0), (1, 1)]


def test_fault_rate_limit_and_custom_bodies(c):
    c.post("/admin/faults", {"status": 429, "retry_after": "Wed, 21 Oct 2015 07:28:00 GMT"})
    c.post("/admin/faults", {"status": 500, "body": {"error": {"code": "custom", "message": "m"}}})
    c.post("/admin/faults", {"status": 502, "body": "<html>bad gateway</html>"})
    r = c.get(f"{API}/boards")
    assert r.status == 429 and r.error_code == "rate_limited" and r.headers["Retry-After"].startswith("Wed")
    assert c.get(f"{API}/boards").error_code == "custom"
    c.conn.request("GET", f"{API}/boards")
    resp = c.conn.getresponse()
    assert resp.status == 502 and resp.read() == b"<html>bad gateway</html>"


def test_fault_matching_and_fifo(c, board):
    c.post("/admin/faults", {"path_prefix": f"{API}/events", "method": "post", "status": 500})
    c.post("/admin/faults", {"status": 502})
    c.post("/admin/faults", {"status": 504})
    assert c.get(f"{API}/boards").status == 502        # events fault does not match a GET
    r = c.post(f"{API}/events", {"events": [ev(1)]})    # first matching fault in FIFO order
    assert r.status == 500
    assert c.get(f"{API}/boards").status == 504
    assert c.get(f"{API}/boards").status == 200
    assert state(c)["events"] == []


def test_faults_never_apply_to_admin(c):
    c.post("/admin/faults", {"status": 500, "count": 3})
    assert c.get("/admin/health").status == 200
    assert c.get(f"/admin/apps/{APP}/state").status == 200
    faults = c.get("/admin/faults").json["faults"]
    assert len(faults) == 1 and faults[0]["count"] == 3 and faults[0]["status"] == 500
    assert c.get(f"{API}/boards").status == 500
    assert c.get("/admin/faults").json["faults"][0]["count"] == 2
    assert c.delete("/admin/faults").status == 200
    assert c.get("/admin/faults").json["faults"] == []
    assert c.get(f"{API}/boards").status == 200


def test_fault_drop_closes_without_response(c, server):
    c.post("/admin/faults", {"path_prefix": f"{API}/events", "drop": True})
    victim = Client(server.port)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        victim.post(f"{API}/events", {"events": [ev(1)]})
    victim.close()
    log = c.get("/admin/requests").json["requests"]
    assert log[-1]["fault"] == "drop" and log[-1]["status"] is None and log[-1]["body_size"] > 0
    assert state(c)["events"] == []
    assert c.post(f"{API}/events", {"events": [ev(1)]}).status == 200


def test_fault_delay(c):
    c.post("/admin/faults", {"delay_ms": 200})
    t0 = time.monotonic()
    assert c.get(f"{API}/boards").status == 200
    assert time.monotonic() - t0 >= 0.2
    c.get(f"{API}/boards")  # the fault is used up: the next request is not delayed
    log = c.get("/admin/requests").json["requests"]
    assert [r["fault"] for r in log[-2:]] == ["delay", None], log


def test_a_long_delay_holds_a_request_until_released(c, server):
    c.post("/admin/faults", {"delay_ms": 600000, "path_prefix": f"{API}/boards"})
    held = Client(server.port)
    answer: list[int] = []
    done = threading.Event()
    threading.Thread(target=lambda: (answer.append(held.get(f"{API}/boards").status), done.set()),
                     daemon=True).start()
    assert wait_until(lambda: c.get("/admin/faults").json["held"] == 1)
    assert not done.is_set() and c.get(f"{API}/ideas").status == 200  # others are served meanwhile
    assert c.post("/admin/faults/release").json == {"released": 1}
    assert done.wait(30) and answer == [200]
    assert c.get("/admin/faults").json == {"faults": [], "held": 0}
    assert c.post("/admin/faults/release").json == {"released": 0}
    held.close()


def test_a_reset_drops_a_held_request_at_once(c, server):
    c.post("/admin/faults", {"delay_ms": 600000, "path_prefix": f"{API}/boards"})
    held = Client(server.port)
    failed = threading.Event()

    def call() -> None:
        try:
            held.get(f"{API}/boards")
        except (ConnectionError, http.client.HTTPException, OSError):
            failed.set()
    threading.Thread(target=call, daemon=True).start()
    assert wait_until(lambda: c.get("/admin/faults").json["held"] == 1)
    assert c.post("/admin/reset").status == 200
    assert failed.wait(30), "the held request was not dropped by the reset"
    assert c.get("/admin/faults").json["held"] == 0 and c.get("/admin/requests").json["requests"] == []
    held.close()


def test_a_request_held_across_a_log_clear_is_not_logged_after_it(c, server):
    # A request a fault holds past the end of one test must not show up in
    # the next test's log once it finishes.
    c.post("/admin/faults", {"delay_ms": 300, "count": 1})
    held = Client(server.port)
    done = threading.Event()
    threading.Thread(target=lambda: (held.get(f"{API}/boards"), done.set()), daemon=True).start()
    # The fault is used up once the held request has started.
    assert wait_until(lambda: c.get("/admin/faults").json["faults"] == [], timeout=10)
    assert c.delete("/admin/requests").status == 200
    assert done.wait(10)
    held.close()
    assert c.get(f"{API}/boards").status == 200
    log = c.get("/admin/requests").json["requests"]
    assert [(r["path"], r["fault"]) for r in log] == [(f"{API}/boards", None)], log


def test_fault_delay_before_status_or_drop(c):
    c.post("/admin/faults", {"delay_ms": 300, "status": 503, "path_prefix": f"{API}/events"})
    t0 = time.monotonic()
    assert c.post(f"{API}/events", {"events": [ev(1)]}).status == 503
    assert time.monotonic() - t0 >= 0.3
    assert state(c)["events"] == []
    fault = c.post("/admin/faults", {"delay_ms": 100, "drop": True}).json["fault"]
    assert fault["drop"] is True and fault["delay_ms"] == 100
    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        c.get(f"{API}/boards")


def test_fault_on_stream(c, server):
    c.post("/admin/faults", {"path_prefix": f"{API}/config/stream", "status": 503, "retry_after": "1"})
    stream = Sse(server.port)
    try:
        assert stream.status_line.startswith("HTTP/1.1 503") and stream.headers["retry-after"] == "1"
    finally:
        stream.close()


def test_fault_endless_line_on_stream(c, server):
    c.post("/admin/faults", {"path_prefix": f"{API}/config/stream", "endless_line": True})
    stream = Sse(server.port)
    try:
        assert stream.status_line.startswith("HTTP/1.1 200")
        assert stream.headers["content-type"] == "text/event-stream"
        got = stream.file.read(1 << 20)
        assert got.startswith(b"data: x") and b"\n" not in got and len(got) == 1 << 20
    finally:
        stream.close()
    assert c.get("/admin/requests").json["requests"][-1]["fault"] == "endless_line"


def test_fault_raw_response_is_sent_as_is(c, server):
    raw = b"HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 2\r\n\r\n{}"
    c.post("/admin/faults", {"path_prefix": f"{API}/boards", "raw_response": base64.b64encode(raw).decode()})
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    sock.sendall(f"GET {API}/boards HTTP/1.1\r\nHost: t\r\n\r\n".encode())
    got = b""
    while chunk := sock.recv(4096):
        got += chunk
    sock.close()
    assert got == raw
    assert c.get("/admin/requests").json["requests"][-1]["fault"] == "raw_response"


@pytest.mark.parametrize("spec", [
    {}, {"status": 500, "drop": True}, {"raw_response": ""}, {"raw_response": "not base64!"}, {"status": 99}, {"status": "500"}, {"drop": False},
    {"endless_line": 1}, {"endless_line": True, "drop": True},
    {"delay_ms": -1}, {"status": 500, "count": 0}, {"status": 500, "path_prefix": "v1"},
    {"status": 500, "retry_after": 5},
])
def test_fault_spec_validation(c, spec):
    r = c.post("/admin/faults", spec)
    assert r.status == 400 and r.error_code == "validation"


# --------------------------------------------------------------------------
# Request log, settings, reset, state
# --------------------------------------------------------------------------

def test_request_log(c, alice):
    c.get(f"{API}/ideas?q=dark&limit=5", user=alice)
    c.post(f"{API}/events", {"events": [ev(1)]}, headers={"X-Trace": "t1"})
    log = c.get("/admin/requests").json["requests"]
    assert [(e["method"], e["path"], e["status"]) for e in log] == [
        ("GET", f"{API}/ideas", 200), ("POST", f"{API}/events", 200)]  # admin calls are not logged
    first, second = log
    assert first["query"] == "q=dark&limit=5"
    assert first["headers"]["Authorization"] == "Bearer ***"
    assert first["headers"]["AppNorth-User-Email"] == "alice@example.com"
    assert "tok-a" not in json.dumps(log)
    assert second["headers"]["X-Trace"] == "t1" and second["body_size"] > 0
    assert isinstance(second["time_ms"], int) and second["seq"] > first["seq"]
    assert [e["seq"] for e in c.get(f"/admin/requests?since={first['seq']}").json["requests"]] == [second["seq"]]
    assert c.get("/admin/requests?since=x").status == 400
    assert c.delete("/admin/requests").status == 200
    assert c.get("/admin/requests").json["requests"] == []
    c.get(f"{API}/nothing-here")
    assert c.get("/admin/requests").json["requests"][0]["status"] == 404


def test_request_log_records_oversize(c, server):
    raw_exchange(server.port, (f"POST {API}/feedback HTTP/1.1\r\nHost: t\r\nContent-Length: {11 << 20}\r\n"
                               "Expect: 100-continue\r\n\r\n").encode())
    entry = c.get("/admin/requests").json["requests"][-1]
    assert entry["status"] == 413 and entry["body_size"] == 11 << 20


def test_settings(c):
    r = c.get("/admin/settings")
    assert r.json["settings"] == {"events_max_body": 1024 * 1024, "sse_keepalive": 15.0, "rejected_event_names": [],
                                  "poisoned_event_names": [], "accept_gzip": True, "gzip_responses": False}
    r = c.post("/admin/settings", {"events_max_body": 2048, "sse_keepalive": 0.5, "accept_gzip": False,
                                   "gzip_responses": True})
    assert r.status == 200 and r.json["settings"] == {"events_max_body": 2048, "sse_keepalive": 0.5,
                                                      "rejected_event_names": [], "poisoned_event_names": [],
                                                      "accept_gzip": False,
                                                      "gzip_responses": True}
    c.post("/admin/settings", {"gzip_responses": False})
    for bad in ({"events_max_body": 0}, {"sse_keepalive": "1"}, {"colour": 1}, {"events_max_body": 1.5},
                {"accept_gzip": 1}, {"accept_gzip": "yes"}, {"gzip_responses": None}):
        assert c.post("/admin/settings", bad).status == 400
    c.post("/admin/reset")
    settings = c.get("/admin/settings").json["settings"]
    assert settings["events_max_body"] == 1024 * 1024 and settings["accept_gzip"] is True
    assert settings["gzip_responses"] is False


def test_reset_wipes_everything(c, idea, alice):
    c.post(f"{API}/ideas/{idea}/comments", {"body": "x"}, key="k")
    c.post("/admin/faults", {"status": 500, "path_prefix": "/nowhere"})
    publish(c, {"a": 1})
    c.get(f"{API}/boards")
    assert c.post("/admin/reset").json == {"ok": True}
    st = state(c)
    assert all(st[k] == [] for k in ("boards", "ideas", "comments", "feedback", "votes", "messages", "events"))
    assert st["config"] is None and st["config_version"] == 0
    assert c.get("/admin/faults").json["faults"] == []
    assert c.get("/admin/requests").json["requests"] == []
    assert c.get(f"{API}/boards", user=alice).status == 401  # users are gone too
    # the old key is free again
    assert c.post("/admin/reset", {"seed_demo": True}).status == 200
    assert [b["name"] for b in c.get(f"{API}/boards").json["boards"]] == ["Features", "Bugs"]


def test_admin_boards_ideas_users_validation(c, board):
    assert c.post(f"/admin/apps/{APP}/boards", {"description": "no name"}).status == 400
    assert c.post(f"/admin/apps/{APP}/ideas", {"board_id": board, "title": "t", "status": "weird"}).status == 400
    assert c.post(f"/admin/apps/{APP}/ideas", {"board_id": "b_999999", "title": "t"}).status == 404
    assert c.post("/admin/users", {"app": "bad app", "email": "a@b", "token": "t"}).status == 400
    assert c.post("/admin/users", {"app": APP, "email": "a@b"}).status == 400
    r = c.post(f"/admin/apps/{APP}/ideas", {"board_id": board, "title": "Shipped", "body": "", "status": "done"})
    assert r.status == 201 and r.json["idea"]["status"] == "done"
    assert c.post("/admin/nope").status == 404
    assert c.get("/admin/reset").status == 405


def test_admin_delete_idea_takes_its_comments_and_refuses_new_ones(c, idea):
    assert c.post(f"{API}/ideas/{idea}/comments", {"body": "before"}, key="d1").status == 201
    assert c.delete(f"/admin/apps/{APP}/ideas/{idea}").status == 200
    assert state(c)["ideas"] == [] and state(c)["comments"] == []
    assert c.post(f"{API}/ideas/{idea}/comments", {"body": "after"}, key="d2").status == 404
    assert c.delete(f"/admin/apps/{APP}/ideas/{idea}").status == 404
    assert c.delete(f"/admin/apps/{APP}/ideas/nonsense").status == 404


def test_state_shape(c, idea, alice):
    c.post(f"{API}/ideas/{idea}/comments", {"body": "c"}, key="k1")
    c.post(f"{API}/ideas/{idea}/votes", {}, key="k2", user=alice)
    c.post(f"{API}/chat/messages", {"body": "m"}, key="k3")
    c.post(f"{API}/feedback", {"text": "f", "diagnostics": {"d": 1}}, key="k4")
    c.post(f"{API}/events", {"events": [ev(1, properties={"p": 1})]})
    publish(c, {"flag": True})
    st = state(c)
    assert set(st) >= {"boards", "ideas", "comments", "feedback", "votes", "messages", "events",
                       "config", "config_version"}
    assert len(st["boards"]) == len(st["ideas"]) == len(st["comments"]) == len(st["messages"]) == 1
    assert st["votes"][0]["idea_id"] == idea and st["feedback"][0]["diagnostics"] == {"d": 1}
    event = st["events"][0]
    assert set(event) >= {"id", "name", "timestamp", "properties", "properties_raw", "anonymous_id",
                          "user_id", "session_id"}
    assert event["properties_raw"] == '{"p": 1}' and event["properties"] == {"p": 1}
    assert st["config"] == {"flag": True} and st["config_version"] == 1


def test_admin_is_loopback_only_check():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("::ffff:127.0.0.1")
    assert not is_loopback("10.0.0.5") and not is_loopback("192.168.1.1") and not is_loopback("bogus")


# --------------------------------------------------------------------------
# Lifecycle: seeding, persistence, command line
# --------------------------------------------------------------------------

def test_seed_demo_and_file_persistence(tmp_path):
    db = str(tmp_path / "dev.sqlite")
    with DevServer("127.0.0.1", 0, db, seed_demo=True) as s:
        c = Client(s.port)
        ideas = c.get(f"{API}/ideas").json["ideas"]
        assert {i["title"] for i in ideas} == {"Dark mode", "Offline sync", "Crash on login", "Faster search"}
        assert len({i["status"] for i in ideas}) >= 3
        assert [i["title"] for i in c.get(f"{API}/ideas?q=sync").json["ideas"]] == ["Offline sync"]
        c.post(f"{API}/ideas/{ideas[0]['id']}/comments", {"body": "persist me"}, key="p")
        c.close()
    with DevServer("127.0.0.1", 0, db, seed_demo=True) as s:  # re-seeding is a no-op
        c = Client(s.port)
        assert len(c.get(f"{API}/boards").json["boards"]) == 2
        assert c.get(f"{API}/ideas/{ideas[0]['id']}/comments").json["comments"][0]["body"] == "persist me"
        assert c.post(f"{API}/ideas/{ideas[0]['id']}/comments", {"body": "persist me"},
                      key="p").headers["Idempotent-Replayed"] == "true"
        c.close()


def test_restart_on_same_port(tmp_path):
    db = str(tmp_path / "dev.sqlite")
    s = DevServer("127.0.0.1", 0, db).start()
    port = s.port
    Client(port).post(f"/admin/apps/{APP}/boards", {"name": "Kept", "description": ""})
    s.stop()
    with DevServer("127.0.0.1", port, db) as s2:
        assert s2.port == port
        assert Client(port).get(f"{API}/boards").json["boards"][0]["name"] == "Kept"


@contextlib.contextmanager
def server_command(*args: str):
    """The server's command line as a child process, killed if still running."""
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "appnorth_devserver.py"), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def test_command_line_arms_faults_before_serving_and_sizes_the_log(tmp_path):
    """A restart after an outage can answer 503 from its very first request."""
    port_file = tmp_path / "port"
    fault = json.dumps({"status": 503, "retry_after": "2", "for_ms": 60_000})
    with server_command("--port", "0", "--port-file", str(port_file), "--fault", fault,
                        "--request-log-limit", "3") as proc:
        assert proc.stdout.readline().startswith("appnorth-devserver listening")
        client = Client(int(port_file.read_text()))
        for _ in range(5):
            r = client.get(f"{API}/boards")
            assert r.status == 503 and r.headers["Retry-After"] == "2"
        assert len(client.get("/admin/requests").json["requests"]) == 3
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    bad = subprocess.run([sys.executable, os.path.join(HERE, "appnorth_devserver.py"), "--fault", '{"status":7}'],
                         capture_output=True, text=True, timeout=10)
    assert bad.returncode == 2 and "status" in bad.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_command_line(tmp_path, sig):
    port_file = tmp_path / "port"
    with server_command("--host", "127.0.0.1", "--port", "0", "--seed-demo", "--port-file", str(port_file),
                        "--db", str(tmp_path / "db.sqlite")) as proc:
        line = proc.stdout.readline()
        m = re.fullmatch(r"appnorth-devserver listening on http://127\.0\.0\.1:(\d+)\n", line)
        assert m, line
        port = int(m.group(1))
        assert wait_until(port_file.exists)
        assert port_file.read_text().strip() == str(port)
        assert len(Client(port).get(f"{API}/boards").json["boards"]) == 2
        proc.send_signal(sig)
        assert proc.wait(timeout=5) == 0
        assert "Traceback" not in proc.stderr.read()
