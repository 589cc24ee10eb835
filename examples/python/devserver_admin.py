"""DEV SERVER ONLY: the local dev server's /admin endpoints, which the
examples use to "lose connectivity" (every API connection dropped), to
register test accounts and to publish config. A real API has none of this;
a real app learns about the network from the OS."""

from __future__ import annotations

import json
import urllib.request
from typing import Any, Optional


def admin(api_url: str, method: str, path: str, body: Optional[Any] = None) -> Any:
    data = None if body is None else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(api_url.rstrip("/") + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def go_offline(api_url: str) -> None:
    admin(api_url, "POST", "/admin/faults", {"drop": True, "count": 100000})


def go_online(api_url: str) -> None:
    admin(api_url, "DELETE", "/admin/faults")
