"""Range tests through the C ABI, from Python: every integer, size and clock
parameter of include/appnorth.h is called with 0, -1, 1, its type's
extremes, SIZE_MAX, INT64_MAX/1000+1 and the values around its documented
limits. Each call returns the documented status; none traps.

The table below, and the C one in Tests/c/test_ranges.c, must name every
such parameter of the header: adding one without a row fails here.

The calls go through a raw ctypes view of the library (argtypes from the
header, no errcheck), so values reach the C ABI as a C host would pass
them, after C's own conversion to the parameter type.
"""

from __future__ import annotations

import ctypes
import re
from ctypes import c_char_p, c_double, c_int32, c_int64, c_size_t, c_uint64, c_void_p
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

import pytest

import appnorth
from appnorth import _ops
from appnorth_test_support import REPO_ROOT
from test_header_coverage import _eval_define, _header_defines, _header_functions

OK = 0
INV = 1  # APPNORTH_E_INVALID_ARGUMENT
BIG = 4  # APPNORTH_E_TOO_LARGE
TIMEOUT = 16  # APPNORTH_E_TIMEOUT
NOT_FOUND = 8  # APPNORTH_E_NOT_FOUND

INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1
INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
SIZE_MAX = 2 ** 64 - 1
INTEGER_TYPES = ("int32_t", "int64_t", "size_t", "uint32_t", "uint64_t", "int", "long", "unsigned", "short")
C_TABLE = REPO_ROOT / "Tests" / "c" / "test_ranges.c"


def _define(name: str) -> int:
    return _eval_define(_header_defines()[name.removeprefix("APPNORTH_")])


def integer_parameters(functions: Dict[str, List[str]]) -> Set[Tuple[str, str]]:
    """(function, parameter) for every integer, size or clock parameter."""
    found = set()
    for function, params in functions.items():
        for param in params:
            words = param.replace("*", " * ").split()
            if "*" in words or "(" in param or len(words) < 2:
                continue
            if any(t in words[:-1] for t in INTEGER_TYPES):
                found.add((function, words[-1]))
    return found


def header_integer_parameters() -> Set[Tuple[str, str]]:
    return integer_parameters(_header_functions())


def c_table_parameters() -> Set[Tuple[str, str]]:
    text = C_TABLE.read_text(encoding="utf-8")
    return set(re.findall(r'\{\s*"(appnorth_\w+)",\s*"(\w+)",\s*T_', text))


# ---------------------------------------------------------------------------
# A raw view of the library: argtypes from the header, status returned as is
# ---------------------------------------------------------------------------

def _ctype(declaration: str) -> Any:
    words = declaration.replace("*", " * ").split()
    if "*" in words or "(" in declaration:
        return c_void_p
    kind = " ".join(w for w in words[:-1] if w != "const")
    return {"int32_t": c_int32, "int64_t": c_int64, "size_t": c_size_t, "uint64_t": c_uint64,
            "double": c_double}.get(kind, c_void_p)


#: Functions that return a pointer (the rest used here return a status).
POINTER_RESULTS = {"appnorth_client_options_new", "appnorth_feedback_new", "appnorth_events_options_new",
                   "appnorth_config_options_new"}


class Raw:
    def __init__(self) -> None:
        self.lib = ctypes.CDLL(appnorth.LIBRARY_PATH)
        self.functions = _header_functions()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        fn = getattr(self.lib, name)
        fn.argtypes = [_ctype(p) for p in self.functions[name]]
        fn.restype = c_void_p if name in POINTER_RESULTS else c_int32
        return fn


@dataclass
class Row:
    type: str
    lo: int
    hi: int
    call: Callable[["Fixtures", int], int]
    in_range: int = OK
    in_range_alt: Optional[int] = None
    below: int = INV
    above: int = INV
    probe_max: int = 0
    zero_ok: bool = False


class Fixtures:
    """The handles the calls need, made once per test."""

    def __init__(self, raw: Raw, server_url: str, directory: Path) -> None:
        self.raw = raw
        r = raw
        self.err = appnorth._lib.appnorth_error()
        e = ctypes.byref(self.err)
        self.e = e
        o = r.appnorth_client_options_new()
        assert r.appnorth_client_options_set_api_url(o, server_url.encode(), e) == OK
        assert r.appnorth_client_options_set_app_id(o, b"pyranges-app", e) == OK
        self.client = c_void_p()
        assert r.appnorth_client_new(o, ctypes.byref(self.client), e) == OK
        self.client_options = o
        d = r.appnorth_client_options_new()
        assert r.appnorth_client_options_set_api_url(d, server_url.encode(), e) == OK
        assert r.appnorth_client_options_set_app_id(d, b"pyranges-app", e) == OK
        assert r.appnorth_client_options_set_dispatch_mode(d, 1, e) == OK
        self.dispatch_client = c_void_p()
        assert r.appnorth_client_new(d, ctypes.byref(self.dispatch_client), e) == OK
        r.appnorth_client_options_free(d)
        self.memory = c_void_p()
        assert r.appnorth_storage_new_memory(ctypes.byref(self.memory), e) == OK
        self.clock = c_void_p()
        assert r.appnorth_clock_new_manual(1_700_000_000_000, ctypes.byref(self.clock), e) == OK
        self.screenshot = ctypes.create_string_buffer(_define("APPNORTH_MAX_SCREENSHOT_BYTES") + 1)
        self.ca_pem = ctypes.create_string_buffer(b"-----BEGIN CERTIFICATE-----", _define("APPNORTH_MAX_CA_PEM_BYTES") + 1)
        self.events_options = r.appnorth_events_options_new()
        assert r.appnorth_events_options_set_client(self.events_options, self.client, e) == OK
        assert r.appnorth_events_options_set_data_dir(self.events_options, str(directory).encode(), e) == OK
        self.events = c_void_p()
        assert r.appnorth_events_new(self.events_options, ctypes.byref(self.events), e) == OK
        self.config_options = r.appnorth_config_options_new()
        assert r.appnorth_config_options_set_client(self.config_options, self.client, e) == OK
        assert r.appnorth_config_options_set_data_dir(self.config_options, str(directory).encode(), e) == OK
        self.config = c_void_p()
        assert r.appnorth_config_new(self.config_options, ctypes.byref(self.config), e) == OK
        self.log = appnorth._lib.LOG_FN(lambda level, message, user_data: None)

    def close(self) -> None:
        r = self.raw
        r.appnorth_config_free(self.config)
        r.appnorth_config_options_free(self.config_options)
        r.appnorth_events_free(self.events)
        r.appnorth_events_options_free(self.events_options)
        r.appnorth_clock_free(self.clock)
        r.appnorth_storage_free(self.memory)
        r.appnorth_client_options_free(self.client_options)
        r.appnorth_client_free(self.client)
        r.appnorth_client_free(self.dispatch_client)


def _status_str(f: Fixtures, v: int) -> int:
    f.raw.lib.appnorth_status_str.restype = c_char_p
    f.raw.lib.appnorth_status_str.argtypes = [c_int32]
    return OK if f.raw.lib.appnorth_status_str(v) else -1000


def _screenshot(f: Fixtures, v: int) -> int:
    r = f.raw
    fb = r.appnorth_feedback_new()
    try:
        return int(r.appnorth_feedback_add_screenshot(fb, f.screenshot, v, b"image/png", f.e))
    finally:
        r.appnorth_feedback_free(fb)


def _buffer_set(f: Fixtures, v: int) -> int:
    r = f.raw
    result: List[int] = []
    load_type = ctypes.CFUNCTYPE(c_int32, c_void_p, c_void_p)
    save_type = ctypes.CFUNCTYPE(c_int32, c_void_p, c_void_p, c_size_t)

    def load(user_data: Any, out: Any) -> int:
        err = appnorth._lib.appnorth_error()
        result.append(r.appnorth_buffer_set(out, f.screenshot, v, ctypes.byref(err)))
        return 0

    load_fn, save_fn = load_type(load), save_type(lambda u, b, n: 0)
    storage = c_void_p()
    assert r.appnorth_storage_new_callbacks(load_fn, save_fn, None, None, ctypes.byref(storage), f.e) == OK
    queue = c_void_p()
    r.appnorth_queue_new(storage, 0, ctypes.byref(queue), f.e)
    r.appnorth_queue_free(queue)
    r.appnorth_storage_free(storage)
    return result[0] if result else -1000


def _with_handle(new: Callable[[Fixtures, int, Any], int], free: str) -> Callable[[Fixtures, int], int]:
    def call(f: Fixtures, v: int) -> int:
        handle = c_void_p()
        rc = int(new(f, v, ctypes.byref(handle)))
        getattr(f.raw, free)(handle)
        return rc
    return call


def _events_pending(f: "Fixtures", v: int) -> int:
    out = c_void_p()
    rc = f.raw.appnorth_events_pending(f.events, v, ctypes.byref(out), f.e)
    f.raw.appnorth_string_free(out)
    return rc


def _events_close(f: Fixtures, v: int) -> int:
    events = c_void_p()
    assert f.raw.appnorth_events_new(f.events_options, ctypes.byref(events), f.e) == OK
    rc = int(f.raw.appnorth_events_close(events, v, f.e))
    f.raw.appnorth_events_free(events)
    return rc


def _shutdown_in_child(f: Fixtures, v: int) -> int:
    """appnorth_shutdown is for good and process-wide: each value is tried
    in a forked child, whose exit status is the call's status."""
    import os
    pid = os.fork()
    if pid == 0:  # the child: one call, then out without Python's teardown
        os._exit(int(f.raw.appnorth_shutdown(v, None)))
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _hold_and_resume(f: Fixtures, v: int) -> int:
    """A hold is resumed at once (a refused one held nothing)."""
    rc = int(f.raw.appnorth_callbacks_hold(v, f.e))
    f.raw.appnorth_callbacks_resume()
    return rc


def _get_int(f: Fixtures, v: int) -> int:
    out = c_int64(0)
    rc = int(f.raw.appnorth_config_get_int(f.config, b"absent", v, ctypes.byref(out), f.e))
    return -1001 if rc == OK and out.value != c_int64(v).value else rc


def _get_bool(f: Fixtures, v: int) -> int:
    out = c_int32(0)
    rc = int(f.raw.appnorth_config_get_bool(f.config, b"absent", v, ctypes.byref(out), f.e))
    return -1001 if rc == OK and out.value != c_int32(v).value else rc


MAX_SCREENSHOT = _define("APPNORTH_MAX_SCREENSHOT_BYTES")
MAX_BUFFER = _define("APPNORTH_MAX_BUFFER_BYTES")

TABLE: Dict[Tuple[str, str], Row] = {
    ("appnorth_status_str", "code"): Row("int32_t", INT32_MIN, INT32_MAX, _status_str),
    ("appnorth_client_options_set_timeouts", "api_request_ms"): Row(
        "int32_t", 1, 600_000, lambda f, v: f.raw.appnorth_client_options_set_timeouts(f.client_options, v, 3000, f.e)),
    ("appnorth_client_options_set_timeouts", "resource_download_ms"): Row(
        "int32_t", 1, 600_000, lambda f, v: f.raw.appnorth_client_options_set_timeouts(f.client_options, 3000, v, f.e)),
    ("appnorth_client_options_set_logger", "min_level"): Row(
        "int32_t", 0, 3, lambda f, v: f.raw.appnorth_client_options_set_logger(f.client_options, f.log, v, None, f.e)),
    # Below 27 bytes there is no room for the BEGIN CERTIFICATE line.
    ("appnorth_client_options_set_ca_pem", "length"): Row(
        "size_t", 27, _define("APPNORTH_MAX_CA_PEM_BYTES"),
        lambda f, v: f.raw.appnorth_client_options_set_ca_pem(f.client_options, f.ca_pem, v, f.e), above=BIG),
    ("appnorth_client_options_set_proxy", "ignore_environment"): Row(
        "int32_t", 0, 1, lambda f, v: f.raw.appnorth_client_options_set_proxy(f.client_options, None, v, f.e)),
    ("appnorth_client_options_set_compression", "enabled"): Row(
        "int32_t", 0, 1, lambda f, v: f.raw.appnorth_client_options_set_compression(f.client_options, v, f.e)),
    ("appnorth_client_options_set_dispatch_mode", "enabled"): Row(
        "int32_t", 0, 1, lambda f, v: f.raw.appnorth_client_options_set_dispatch_mode(f.client_options, v, f.e)),
    ("appnorth_dispatch", "max_callbacks"): Row(
        "int32_t", 0, INT32_MAX, lambda f, v: f.raw.appnorth_dispatch(f.dispatch_client, v, None, f.e)),
    ("appnorth_feedback_add_screenshot", "length"): Row("size_t", 1, MAX_SCREENSHOT, _screenshot, above=BIG),
    # In-range lengths above 64 KiB would copy up to 1 GiB: not called.
    ("appnorth_buffer_set", "length"): Row("size_t", 0, MAX_BUFFER, _buffer_set, above=BIG, probe_max=65536),
    ("appnorth_queue_new", "max_entries"): Row(
        "int32_t", 0, 10_000, _with_handle(lambda f, v, out: f.raw.appnorth_queue_new(f.memory, v, out, f.e),
                                           "appnorth_queue_free")),
    ("appnorth_clock_new_manual", "wall_ms"): Row(
        "int64_t", INT64_MIN, INT64_MAX,
        _with_handle(lambda f, v, out: f.raw.appnorth_clock_new_manual(v, out, f.e), "appnorth_clock_free")),
    ("appnorth_clock_advance", "ms"): Row(
        "int64_t", 0, INT64_MAX, lambda f, v: f.raw.appnorth_clock_advance(f.clock, v, f.e)),
    ("appnorth_clock_set_wall", "wall_ms"): Row(
        "int64_t", INT64_MIN, INT64_MAX, lambda f, v: f.raw.appnorth_clock_set_wall(f.clock, v, f.e)),
    ("appnorth_cache_new", "ttl_seconds"): Row(
        "int32_t", 0, 31_536_000,
        _with_handle(lambda f, v, out: f.raw.appnorth_cache_new(f.memory, v, f.clock, out, f.e), "appnorth_cache_free")),
    ("appnorth_events_options_set_flush_policy", "flush_interval_ms"): Row(
        "int32_t", 10, 86_400_000,
        lambda f, v: f.raw.appnorth_events_options_set_flush_policy(f.events_options, v, 20, f.e)),
    ("appnorth_events_options_set_flush_policy", "batch_threshold"): Row(
        "int32_t", 1, 10_000,
        lambda f, v: f.raw.appnorth_events_options_set_flush_policy(f.events_options, 30_000, v, f.e)),
    ("appnorth_events_options_set_limits", "max_events"): Row(
        "int32_t", 1, 10_000_000,
        lambda f, v: f.raw.appnorth_events_options_set_limits(f.events_options, v, 5 << 20, 64 << 10, f.e)),
    ("appnorth_events_options_set_limits", "max_bytes"): Row(
        "int64_t", 1024, 1 << 30,
        lambda f, v: f.raw.appnorth_events_options_set_limits(f.events_options, 10_000, v, 64 << 10, f.e)),
    ("appnorth_events_options_set_limits", "max_event_bytes"): Row(
        "int32_t", 256, 16 << 20,
        lambda f, v: f.raw.appnorth_events_options_set_limits(f.events_options, 10_000, 5 << 20, v, f.e)),
    ("appnorth_events_options_set_retry", "base_delay_ms"): Row(
        "int32_t", 1, 600_000,
        lambda f, v: f.raw.appnorth_events_options_set_retry(f.events_options, v, 3, 120_000, 5, f.e)),
    ("appnorth_events_options_set_retry", "retries"): Row(
        "int32_t", 0, 10, lambda f, v: f.raw.appnorth_events_options_set_retry(f.events_options, 1000, v, 120_000, 5, f.e)),
    ("appnorth_events_options_set_retry", "retry_after_cap_ms"): Row(
        "int32_t", 0, INT32_MAX, lambda f, v: f.raw.appnorth_events_options_set_retry(f.events_options, 1000, 3, v, 5, f.e)),
    ("appnorth_events_options_set_retry", "breaker_threshold"): Row(
        "int32_t", 1, 100, lambda f, v: f.raw.appnorth_events_options_set_retry(f.events_options, 1000, 3, 120_000, v, f.e)),
    ("appnorth_events_options_set_retry_jitter", "percent"): Row(
        "int32_t", 0, 100, lambda f, v: f.raw.appnorth_events_options_set_retry_jitter(f.events_options, v, f.e)),
    ("appnorth_config_options_set_reconnect_jitter", "percent"): Row(
        "int32_t", 0, 100, lambda f, v: f.raw.appnorth_config_options_set_reconnect_jitter(f.config_options, v, f.e)),
    ("appnorth_events_options_set_session_policy", "idle_timeout_ms"): Row(
        "int32_t", 0, INT32_MAX, lambda f, v: f.raw.appnorth_events_options_set_session_policy(f.events_options, v, 0, f.e)),
    ("appnorth_events_options_set_session_policy", "max_length_ms"): Row(
        "int32_t", 0, INT32_MAX, lambda f, v: f.raw.appnorth_events_options_set_session_policy(f.events_options, 0, v, f.e)),
    ("appnorth_events_options_set_require_consent", "require"): Row(
        "int32_t", 0, 1, lambda f, v: f.raw.appnorth_events_options_set_require_consent(f.events_options, v, f.e)),
    ("appnorth_events_options_set_remote_settings", "follow"): Row(
        "int32_t", 0, 1, lambda f, v: f.raw.appnorth_events_options_set_remote_settings(f.events_options, v, f.e)),
    ("appnorth_events_close", "timeout_ms"): Row("int32_t", 0, INT32_MAX, _events_close),
    ("appnorth_events_pending", "max"): Row("int32_t", 1, INT32_MAX, _events_pending),
    ("appnorth_shutdown", "timeout_ms"): Row("int32_t", 0, INT32_MAX, _shutdown_in_child),
    ("appnorth_callbacks_hold", "timeout_ms"): Row("int32_t", 0, INT32_MAX, _hold_and_resume),
    ("appnorth_events_flush", "timeout_ms"): Row(
        "int32_t", 0, INT32_MAX, lambda f, v: f.raw.appnorth_events_flush(f.events, v, f.e), in_range_alt=TIMEOUT),
    ("appnorth_events_flush_sent", "timeout_ms"): Row(
        "int32_t", 0, INT32_MAX, lambda f, v: f.raw.appnorth_events_flush_sent(f.events, v, ctypes.byref(c_int64(-1)), f.e),
        in_range_alt=TIMEOUT),
    # In range the flush starts; its completion goes to a thunk that ignores it.
    ("appnorth_events_flush_async", "timeout_ms"): Row(
        "int32_t", 0, INT32_MAX, lambda f, v: f.raw.appnorth_events_flush_async(
            f.events, v, ctypes.cast(_ops.COMPLETION, c_void_p), None, None, f.e)),
    # Every id is valid input: OK for one in flight, else NOT_FOUND.
    ("appnorth_op_cancel", "op"): Row(
        "uint64_t", 0, 2 ** 64 - 1, lambda f, v: f.raw.appnorth_op_cancel(v, f.e), in_range_alt=NOT_FOUND),
    ("appnorth_events_set_network_type", "network_type"): Row(
        "int32_t", 0, 3, lambda f, v: f.raw.appnorth_events_set_network_type(f.events, v, f.e)),
    ("appnorth_events_set_consent", "granted"): Row(
        "int32_t", 0, 1, lambda f, v: f.raw.appnorth_events_set_consent(f.events, v, f.e)),
    ("appnorth_config_options_set_ttl_seconds", "ttl_seconds"): Row(
        "int32_t", 0, 31_536_000, lambda f, v: f.raw.appnorth_config_options_set_ttl_seconds(f.config_options, v, f.e)),
    ("appnorth_config_options_set_poll_interval_ms", "poll_interval_ms"): Row(
        "int32_t", 10, 86_400_000,
        lambda f, v: f.raw.appnorth_config_options_set_poll_interval_ms(f.config_options, v, f.e), zero_ok=True),
    # With max_ms 0 (60000): base 0 (1000) or 1 to 60000.
    ("appnorth_config_options_set_reconnect_backoff_ms", "base_ms"): Row(
        "int32_t", 0, 60_000,
        lambda f, v: f.raw.appnorth_config_options_set_reconnect_backoff_ms(f.config_options, v, 0, f.e)),
    # With base_ms 0 (1000): max 1000 to 3600000, or 0 (60000).
    ("appnorth_config_options_set_reconnect_backoff_ms", "max_ms"): Row(
        "int32_t", 1000, 3_600_000,
        lambda f, v: f.raw.appnorth_config_options_set_reconnect_backoff_ms(f.config_options, 0, v, f.e), zero_ok=True),
    ("appnorth_client_set_log_level", "min_level"): Row(
        "int32_t", 0, 3, lambda f, v: f.raw.appnorth_client_set_log_level(f.client, v, f.e)),
    ("appnorth_storage_set_logger", "min_level"): Row(
        "int32_t", 0, 3, lambda f, v: f.raw.appnorth_storage_set_logger(f.memory, f.log, v, None, f.e)),
    ("appnorth_config_options_set_logger", "min_level"): Row(
        "int32_t", 0, 3, lambda f, v: f.raw.appnorth_config_options_set_logger(f.config_options, f.log, v, None, f.e)),
    ("appnorth_config_get_int", "default_value"): Row("int64_t", INT64_MIN, INT64_MAX, _get_int),
    ("appnorth_config_get_bool", "default_value"): Row("int32_t", INT32_MIN, INT32_MAX, _get_bool),
    # No listener is registered: every token is unknown.
    ("appnorth_config_remove_listener", "token"): Row(
        "int64_t", INT64_MIN, INT64_MAX, lambda f, v: f.raw.appnorth_config_remove_listener(f.config, v, f.e),
        in_range=INV),
    ("appnorth_config_remove_status_listener", "token"): Row(
        "int64_t", INT64_MIN, INT64_MAX, lambda f, v: f.raw.appnorth_config_remove_status_listener(f.config, v, f.e),
        in_range=INV),
}


def _convert(type_: str, v: int) -> int:
    """The value after a C conversion to the parameter type."""
    bits = 32 if type_ == "int32_t" else 64
    v &= (1 << bits) - 1
    if type_ not in ("size_t", "uint64_t") and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def _values(row: Row) -> Iterator[int]:
    common = [0, -1, 1, INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX, SIZE_MAX,
              INT64_MAX // 1000 + 1, -(INT64_MAX // 1000 + 1), 2 ** 32 - 1]
    limits = [n for limit in (row.lo, row.hi) for n in (limit - 1, limit, limit + 1)]
    seen = set()
    for v in common + limits:
        converted = _convert(row.type, v)
        if converted not in seen:
            seen.add(converted)
            yield converted


def test_every_integer_parameter_has_a_python_row() -> None:
    header = header_integer_parameters()
    assert len(header) >= 30, "the header parse found too few integer parameters"
    missing = sorted(header - set(TABLE))
    stale = sorted(set(TABLE) - header)
    assert not missing, f"integer parameters without a row in TABLE: {missing}"
    assert not stale, f"rows for parameters the header lacks: {stale}"


def test_every_integer_parameter_has_a_c_row() -> None:
    header = header_integer_parameters()
    c_rows = c_table_parameters()
    missing = sorted(header - c_rows)
    stale = sorted(c_rows - header)
    assert not missing, f"integer parameters without a row in {C_TABLE.name}: {missing}"
    assert not stale, f"rows in {C_TABLE.name} for parameters the header lacks: {stale}"


def test_an_unlisted_parameter_is_reported() -> None:
    """A function added to the header with an integer parameter shows up as
    missing; pointers and the error out-parameter do not."""
    functions = dict(_header_functions())
    functions["appnorth_clock_step"] = ["appnorth_clock *clock", "int64_t step_ms", "const size_t count",
                                        "int32_t *out_count", "appnorth_error *err"]
    missing = integer_parameters(functions) - set(TABLE)
    assert missing == {("appnorth_clock_step", "step_ms"), ("appnorth_clock_step", "count")}
    assert ("appnorth_feedback_add_screenshot", "length") in header_integer_parameters()


@pytest.fixture
def fixtures(server_url: str, tmp_path: Path) -> Iterator[Fixtures]:
    made = Fixtures(Raw(), server_url, tmp_path)
    yield made
    made.close()


@pytest.mark.parametrize("key", sorted(TABLE), ids=lambda k: f"{k[0]}.{k[1]}")
def test_each_value_gives_the_documented_status(fixtures: Fixtures, key: Tuple[str, str]) -> None:
    row = TABLE[key]
    calls = 0
    for v in _values(row):
        inside = row.lo <= v <= row.hi or (row.zero_ok and v == 0)
        if inside and row.probe_max and v > row.probe_max:
            continue
        rc = int(row.call(fixtures, v))
        calls += 1
        if inside:
            assert rc == row.in_range or rc == row.in_range_alt, \
                f"{key[0]}({key[1]} = {v}) in range gave {rc}: {fixtures.err.text()}"
        else:
            want = row.below if v < row.lo else row.above
            assert rc == want, f"{key[0]}({key[1]} = {v}) out of range gave {rc}, want {want}: {fixtures.err.text()}"
    assert calls >= 5
