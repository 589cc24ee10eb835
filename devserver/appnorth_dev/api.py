"""Public API endpoints (/v1/apps/{app}/...)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import TYPE_CHECKING, Any, Callable

from .protocol import (
    ApiError, CURSOR_RE, IDEA_STATUSES, IDEMPOTENCY_KEY_RE, MAX_BODY, MAX_EVENTS_PER_BATCH,
    MAX_SCREENSHOTS, MAX_SCREENSHOT_BYTES, MAX_SQLITE_INT, Request, Response, SCREENSHOT_TYPES,
    StreamResponse, json_response, not_found, validation
)
from .jsonutil import canonical_json, element_spans, member_spans
from .validation import parse_id, req_str
from .storage import AlreadyVoted
from .idempotency import IdempotencyGuard
from .faults import _is_int

if TYPE_CHECKING:  # only for annotations: server imports this module
    from .server import DevServer


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
        response = json_response(200, {"accepted": accepted, "duplicates": duplicates})
        # Resent copies show in the log: tests count them (exactly-once delivery).
        response.log = {"events_accepted": accepted, "events_duplicates": duplicates}
        return response

    def _checked_events(self, events: list) -> list[dict]:
        """Validates a batch; nothing is stored unless every event passes.

        An invalid event whose id is readable is listed in the error's
        `rejected` array (400), as is a valid event whose name the app's
        schema refuses (`rejected_event_names`, 422), so the client can drop
        just those and resend the rest. An invalid event without a readable
        id fails the batch with no list."""
        rows, rejected, invalid = [], [], False
        refused = set(self.server.settings.rejected_event_names)
        poisoned = set(self.server.settings.poisoned_event_names)
        if poisoned and any(isinstance(e, dict) and e.get("name") in poisoned for e in events):
            raise ApiError(400, "validation", "the batch cannot be processed")
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
