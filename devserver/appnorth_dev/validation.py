"""Field validation and the prefixed ids of the protocol."""

from __future__ import annotations

import re

from .protocol import APP_ID_RE, validation


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
