"""Strict JSON decoding, canonical JSON and the span helpers that keep client bytes."""

from __future__ import annotations

import json
import re
from typing import Any

from .protocol import validation


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
