"""Settings shared by the endpoints and the HTTP layer."""

from __future__ import annotations

import dataclasses

from .protocol import DEFAULT_EVENTS_MAX_BODY, DEFAULT_SSE_KEEPALIVE, MAX_BODY, validation
from .faults import _is_int


@dataclasses.dataclass
class Settings:
    events_max_body: int = DEFAULT_EVENTS_MAX_BODY
    sse_keepalive: float = DEFAULT_SSE_KEEPALIVE
    # Event names the app's schema refuses (422 listing those events' ids).
    rejected_event_names: list[str] = dataclasses.field(default_factory=list)
    # Event names that make the whole batch fail with a 400 naming no event
    # (a server that cannot say which event it could not take).
    poisoned_event_names: list[str] = dataclasses.field(default_factory=list)
    # False: answer 415 to gzip request bodies, like a server without gzip.
    accept_gzip: bool = True
    # True: gzip response bodies for clients that send Accept-Encoding: gzip.
    gzip_responses: bool = False

    def update(self, spec: dict) -> None:
        unknown = set(spec) - {"events_max_body", "sse_keepalive", "rejected_event_names", "poisoned_event_names",
                               "accept_gzip", "gzip_responses"}
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
        for flag in ("accept_gzip", "gzip_responses"):
            if flag in spec and not isinstance(spec[flag], bool):
                raise validation(f"'{flag}' must be true or false")
        for key in ("rejected_event_names", "poisoned_event_names"):
            if key in spec:
                names = spec[key]
                if (not isinstance(names, list) or len(names) > 100
                        or not all(isinstance(n, str) and 1 <= len(n) <= 256 for n in names)):
                    raise validation(f"'{key}' must be a list of at most 100 names of 1-256 characters")
        if "rejected_event_names" in spec:
            self.rejected_event_names = list(spec["rejected_event_names"])
        if "poisoned_event_names" in spec:
            self.poisoned_event_names = list(spec["poisoned_event_names"])
        if "accept_gzip" in spec:
            self.accept_gzip = spec["accept_gzip"]
        if "gzip_responses" in spec:
            self.gzip_responses = spec["gzip_responses"]
        if "events_max_body" in spec:
            self.events_max_body = spec["events_max_body"]
        if "sse_keepalive" in spec:
            self.sse_keepalive = float(spec["sse_keepalive"])

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)
