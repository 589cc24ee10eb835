"""Routing of method and path to an endpoint."""

from __future__ import annotations

import ipaddress
import re
from typing import Callable

from .protocol import ApiError, not_found
from .validation import check_app_id
from .api import ApiEndpoints
from .admin import AdminEndpoints


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
    r.add("POST", "/admin/faults/release", admin.release_faults)
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
