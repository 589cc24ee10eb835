"""track() from Python through the binding, side by side with peers, and
``import appnorth`` time.

Each (peer, round) runs in a fresh interpreter, so no peer's background
threads, caches or garbage share a process with another; the order of the
peers rotates every round. A child times every call with
``time.perf_counter_ns()`` after a warm-up and prints one JSON line. The
figure per peer is the median over rounds of each round's median (and of its
p99).

Peers, all given the same event name and the same small properties dict:

- ``appnorth``: ``Events.track(name, props)``; the binding serialises the
  dict (as ``json.dumps(props, ensure_ascii=False)`` would), the library
  validates it and stores the event before returning: durable. Its client
  points at a closed loopback port and the flush threshold is 10,000 events,
  so nothing is uploaded while timing. The appnorth child also measures the
  binding's overhead (:func:`binding_overhead`).
- ``posthog``: ``Posthog.capture(event, distinct_id=..., properties=...)``
  with ``send=False``: the whole caller-side path (timestamp, uuid, property
  enrichment, ``clean``) runs, then the event is dropped instead of being put
  on the in-memory queue, and no consumer thread exists. host is a closed
  loopback port; feature flags, GeoIP and exception autocapture are off.
- ``segment``: ``segment.analytics.Client.track(anonymous_id=..., event=...,
  properties=...)`` with ``send=False``: validation, ``clean`` and the
  JSON size check run, the queue ``put`` and the consumer thread do not.
  host is a closed loopback port.
- ``persistqueue`` / ``persistqueue_normal``: ``SQLiteQueue.put(record)``,
  a durable peer: the record (name, properties, a uuid4 id and a timestamp,
  the fields our library adds) is pickled and inserted with a commit per put.
  persist-queue opens SQLite in WAL mode with Python's default
  synchronous=FULL (an fsync per commit); ``persistqueue_normal`` switches
  its connection to synchronous=NORMAL, our setting, for a like-for-like
  comparison.

usage: bench_python.py track --out FILE [--rounds N]
       bench_python.py import --out FILE [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List

EVENT = "screen_view"
PROPERTIES = {"screen": "home", "price": 9.99, "items": 3, "premium": True, "ref": "campaign-42"}

# calls per child (after warm-up); persist-queue with an fsync per put is
# slow, so it gets fewer calls.
CALLS = {
    "appnorth": 5000,
    "posthog": 5000,
    "segment": 5000,
    "persistqueue": 1000,
    "persistqueue_normal": 5000,
}
WARMUP = 300
PEERS = list(CALLS)
# The binding-overhead measurement: rounds of this many calls per side.
OVERHEAD_ROUNDS = int(os.environ.get("BENCH_PY_OVERHEAD_ROUNDS", "20"))
OVERHEAD_CALLS = 250
# The appnorth peer's client, events handle and folder (for the breakdown).
_APPNORTH: Dict[str, Any] = {}


def closed_port() -> int:
    """A loopback port nothing listens on (bound, read, closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def quantile(values: List[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


# ---- one peer in a fresh interpreter ----------------------------------------


def make_peer(name: str, workdir: str) -> Callable[[], Any]:
    host = f"http://127.0.0.1:{closed_port()}"
    if name == "appnorth":
        import appnorth

        client = appnorth.Client(host, "bench-python")
        events = appnorth.Events(client, workdir, flush_interval_ms=86_400_000, batch_threshold=10_000,
                                 max_events=10_000_000, max_bytes=1 << 30, retries=0)
        _APPNORTH.update(client=client, events=events, workdir=workdir)
        return lambda: events.track(EVENT, PROPERTIES)
    if name == "posthog":
        import logging

        from posthog import Posthog

        logging.getLogger("posthog").setLevel(logging.CRITICAL)
        ph = Posthog("phc_benchmark_key", host=host, send=False, disable_geoip=True, max_retries=0, timeout=1,
                     enable_exception_autocapture=False, enable_local_evaluation=False)
        return lambda: ph.capture(EVENT, distinct_id="user-1", properties=PROPERTIES)
    if name == "segment":
        import logging

        from segment.analytics import Client

        logging.getLogger("segment").setLevel(logging.CRITICAL)
        seg = Client(write_key="benchmark-key", host=host, send=False, max_retries=0, timeout=1)
        return lambda: seg.track(anonymous_id="anon-1", event=EVENT, properties=PROPERTIES)
    if name in ("persistqueue", "persistqueue_normal"):
        import uuid

        import persistqueue

        q = persistqueue.SQLiteQueue(os.path.join(workdir, "pq"), auto_commit=True)
        if name == "persistqueue_normal":
            q._putter.execute("PRAGMA synchronous=NORMAL")  # noqa: SLF001 - its one connection
        return lambda: q.put({"id": str(uuid.uuid4()), "name": EVENT, "timestamp": time.time(),
                              "properties": PROPERTIES})
    raise SystemExit(f"unknown peer {name}")


def _p50(fn: Callable[[], Any], n: int = 1500) -> float:
    clock = time.perf_counter_ns
    lat = []
    for _ in range(n):
        t0 = clock()
        fn()
        lat.append((clock() - t0) / 1000.0)
    return quantile(lat, 0.5)


def appnorth_breakdown() -> Dict[str, float]:
    """Where a binding call's time goes: the C function called straight
    through ctypes (the binding's own thin function object, handle and
    out-parameters as plain addresses: the cheapest raw call), json.dumps
    of the properties, the binding's serialiser, and track() given
    pre-serialised JSON text. (Stays below the 10,000-event threshold.)"""
    from appnorth import _lib
    from appnorth.client import json_text

    events = _APPNORTH["events"]
    text = json.dumps(PROPERTIES, ensure_ascii=False)
    name_b, text_b = EVENT.encode(), text.encode()
    raw = _lib.thin("appnorth_events_track")
    out = _lib.CallScratch()
    addr = events._addr  # noqa: SLF001 - the live pointer, for the raw call
    row = {
        "raw_ctypes_p50_us": _p50(lambda: raw(addr, name_b, text_b, out.value_addr, out.err_addr)),
        "json_dumps_p50_us": _p50(lambda: json.dumps(PROPERTIES, ensure_ascii=False)),
        "json_text_p50_us": _p50(lambda: json_text(PROPERTIES, "properties")),
        "track_text_p50_us": _p50(lambda: events.track(EVENT, text)),
    }
    row.update(binding_overhead(raw, name_b, text_b, text))
    return row


def binding_overhead(raw: Any, name_b: bytes, text_b: bytes, text: str) -> Dict[str, float]:
    """The binding's cost beyond the raw ctypes call, measured where the
    library's own work is small and steady: on a second events handle with
    analytics consent revoked, track() validates the properties and drops
    the event (no disk write), so the difference is not lost in the noise
    of a durable write. Three sides, in rounds of OVERHEAD_CALLS calls whose
    order rotates: the raw call (JSON text), Events.track(name, text) and
    Events.track(name, dict); each side's per-call median. The text side's
    difference is the binding's wrapping; the dict side adds the
    serialisation of the properties."""
    import appnorth
    from appnorth import _lib

    dropped = appnorth.Events(_APPNORTH["client"], os.path.join(_APPNORTH["workdir"], "dropped"),
                              flush_interval_ms=86_400_000, batch_threshold=10_000, retries=0, close_timeout_ms=0)
    dropped.set_consent(False)
    out = _lib.CallScratch()
    addr = dropped._addr  # noqa: SLF001
    sides: Dict[str, Callable[[], Any]] = {
        "raw": lambda: raw(addr, name_b, text_b, out.value_addr, out.err_addr),
        "text": lambda: dropped.track(EVENT, text),
        "dict": lambda: dropped.track(EVENT, PROPERTIES),
    }
    names = list(sides)
    lat: Dict[str, List[float]] = {k: [] for k in names}
    clock = time.perf_counter_ns
    for fn in sides.values():
        for _ in range(WARMUP):
            fn()
    for r in range(OVERHEAD_ROUNDS):
        for k in names[r % 3:] + names[:r % 3]:
            fn, bucket = sides[k], lat[k]
            for _ in range(OVERHEAD_CALLS):
                t0 = clock()
                fn()
                bucket.append((clock() - t0) / 1000.0)
    dropped.close()
    med = {k: quantile(v, 0.5) for k, v in lat.items()}
    return {"dropped_raw_p50_us": med["raw"], "dropped_text_p50_us": med["text"],
            "dropped_dict_p50_us": med["dict"], "overhead_text_us": med["text"] - med["raw"],
            "overhead_dict_us": med["dict"] - med["raw"]}


def child(name: str) -> int:
    workdir = tempfile.mkdtemp(prefix=f"appnorth-bench-py-{name}-", dir=os.environ.get("BENCH_TMP") or None)
    try:
        call = make_peer(name, workdir)
        for _ in range(WARMUP):
            call()
        n = CALLS[name]
        lat = [0.0] * n
        clock = time.perf_counter_ns
        start = clock()
        for i in range(n):
            t0 = clock()
            call()
            lat[i] = (clock() - t0) / 1000.0
        wall = (clock() - start) / 1e9
        row = {"peer": name, "calls": n, "p50_us": quantile(lat, 0.5), "p99_us": quantile(lat, 0.99),
               "mean_us": sum(lat) / n, "calls_per_s": n / wall}
        if name == "appnorth":
            row.update(appnorth_breakdown())
        print(json.dumps(row))
        sys.stdout.flush()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    # Skip the peers' atexit hooks (posthog and segment would try a final
    # flush); appnorth's own hook closes its handles either way.
    os._exit(0)


def run_track(out: str, rounds: int) -> None:
    results: Dict[str, List[Dict[str, float]]] = {p: [] for p in PEERS}
    for r in range(rounds):
        order = PEERS[r % len(PEERS):] + PEERS[:r % len(PEERS)]
        for peer in order:
            proc = subprocess.run([sys.executable, __file__, "child", peer], capture_output=True, text=True,
                                  timeout=300)
            if proc.returncode != 0 or not proc.stdout.strip():
                sys.stderr.write(proc.stderr)
                raise SystemExit(f"python bench: {peer} failed")
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            results[peer].append(row)
            print(f"python round {r + 1}: {peer:20s} p50 {row['p50_us']:8.2f} us  p99 {row['p99_us']:9.2f} us",
                  file=sys.stderr)
    summary: Dict[str, Any] = {"bench": "python_track", "rounds": rounds, "warmup": WARMUP, "peers": {}}
    for peer, rows in results.items():
        summary["peers"][peer] = {
            "calls_per_round": CALLS[peer],
            "p50_us": statistics.median(r["p50_us"] for r in rows),
            "p99_us": statistics.median(r["p99_us"] for r in rows),
            "mean_us": statistics.median(r["mean_us"] for r in rows),
            "calls_per_s": statistics.median(r["calls_per_s"] for r in rows),
            "round_p50_us": [r["p50_us"] for r in rows],
        }
        for key in ("raw_ctypes_p50_us", "json_dumps_p50_us", "json_text_p50_us", "track_text_p50_us",
                    "dropped_raw_p50_us", "dropped_text_p50_us", "dropped_dict_p50_us", "overhead_text_us",
                    "overhead_dict_us"):
            if all(key in r for r in rows):
                summary["peers"][peer][key] = statistics.median(r[key] for r in rows)
    summary["versions"] = peer_versions()
    summary["python"] = sys.version.split()[0]
    with open(out, "w") as f:
        json.dump(summary, f)


def peer_versions() -> Dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for dist in ("posthog", "segment-analytics-python", "persist-queue"):
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            found[dist] = "missing"
    return found


# ---- import time -------------------------------------------------------------

IMPORT_PROBE = "import time; t = time.perf_counter_ns(); import appnorth; print(time.perf_counter_ns() - t)"
#: The standard modules ``import appnorth`` imports (a test keeps typing,
#: logging, json and the like out of it).
STDLIB = "atexit, contextlib, ctypes, enum, threading, weakref"


def run_import(out: str, runs: int) -> None:
    # As an installed package: bytecode compiled once and cached (make
    # exports PYTHONDONTWRITEBYTECODE; here the cache goes to a scratch
    # folder, so nothing is written beside the sources).
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cache = tempfile.mkdtemp(prefix="appnorth-bench-pycache-", dir=os.environ.get("BENCH_TMP") or None)
    env["PYTHONPYCACHEPREFIX"] = cache
    try:
        _run_import(out, runs, env)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _run_import(out: str, runs: int, env: Dict[str, str]) -> None:
    times = []
    for i in range(runs + 2):
        proc = subprocess.run([sys.executable, "-c", IMPORT_PROBE], capture_output=True, text=True, timeout=60,
                              env=env)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            raise SystemExit("python bench: import appnorth failed")
        if i >= 2:  # the first two write the bytecode cache and warm the page cache
            times.append(int(proc.stdout.strip()) / 1e6)
    # The floor under the binding's own work: the standard modules it
    # imports (the rest, typing, logging, json, are imported on first use).
    bare = []
    for _ in range(runs):
        proc = subprocess.run([sys.executable, "-c", f"import time; t = time.perf_counter_ns(); import {STDLIB}; "
                               "print(time.perf_counter_ns() - t)"], capture_output=True, text=True, timeout=60,
                              env=env)
        bare.append(int(proc.stdout.strip()) / 1e6)
    # Where it goes: loading the shared library alone, and -X importtime.
    cdll = []
    for _ in range(5):
        proc = subprocess.run([sys.executable, "-c", "import ctypes, os, time; t = time.perf_counter_ns(); "
                               "ctypes.CDLL(os.environ['APPNORTH_LIBRARY']); print(time.perf_counter_ns() - t)"],
                              capture_output=True, text=True, timeout=60, env=env)
        if proc.returncode == 0 and proc.stdout.strip():
            cdll.append(int(proc.stdout.strip()) / 1e6)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import appnorth"], capture_output=True,
                          text=True, timeout=60, env=env)
    modules = []
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[0].startswith("import time:") and parts[1].strip().isdigit():
            modules.append({"module": parts[2].strip(), "self_ms": int(parts[0].split(":")[1]) / 1000,
                            "cumulative_ms": int(parts[1]) / 1000})
    top = sorted(modules, key=lambda m: -m["self_ms"])[:10]
    print(f"python: import appnorth {statistics.median(times):.1f} ms (median of {runs})", file=sys.stderr)
    with open(out, "w") as f:
        json.dump({"bench": "python_import", "runs": runs, "import_ms": statistics.median(times),
                   "import_p90_ms": quantile(times, 0.9), "runs_ms": times,
                   "stdlib_import_ms": statistics.median(bare), "stdlib_modules": STDLIB,
                   "cdll_ms": statistics.median(cdll) if cdll else None,
                   "importtime_self_top": top,
                   "importtime_appnorth": [m for m in modules if m["module"].strip().startswith("appnorth")]}, f)


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "child":
        return child(sys.argv[2])
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["track", "import"])
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    if args.what == "track":
        run_track(args.out, args.rounds)
    else:
        run_import(args.out, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
