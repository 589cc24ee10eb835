"""Admin endpoints (/admin/...): seeding, inspection, faults."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .protocol import IDEA_STATUSES, Request, Response, json_response, not_found, validation
from .jsonutil import member_spans, one_line
from .validation import check_app_id, parse_id, req_str

if TYPE_CHECKING:  # only for annotations: server imports this module
    from .server import DevServer


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
        return json_response(200, {"faults": self.server.faults.list(), "held": self.server.faults.held()})

    def release_faults(self, req: Request) -> Response:
        return json_response(200, {"released": self.server.faults.release()})

    def clear_faults(self, req: Request) -> Response:
        self.server.faults.clear()
        return json_response(200, {"ok": True})

    def get_settings(self, req: Request) -> Response:
        return json_response(200, {"settings": self.server.settings.as_dict()})

    def update_settings(self, req: Request) -> Response:
        data, _ = req.json()
        self.server.settings.update(data)
        return json_response(200, {"settings": self.server.settings.as_dict()})
