"""Memory probe of the Python binding (issue #42, item 6): many calls of
track(), config reads and non-blocking reads with their completions, and
the process's resident memory (RSS) before and after them, past a warm-up.

    python bench/py/leak_probe.py SERVER_URL [--calls N] [--warmup W] [--bound-kib K] [--out FILE]

Each kind runs W calls (warm-up: caches, allocator arenas, the queue
reaching its limit), then the RSS is read, then N calls, then the RSS
again; growth = the second reading less the first. The kinds:

- ``track``: ``Events.track()`` with a small properties dict, on a queue
  whose limits hold every event and whose automatic uploads wait for a day
  (the events go to disk, as in the track() bench; its client points at a
  closed port and logs nowhere);
- ``config``: ``Config.get_string / get_int / get_bool / get_json_text``
  on a bundled file (strings the library allocates and the binding frees);
- ``async``: ``appnorth.aio.list_boards()`` (``appnorth_client_list_boards_async``,
  completed on the library's transfer thread) against the dev server, 64 in
  flight, the JSON result parsed; one in ten is cancelled at once by
  cancelling its task (a CANCELLED completion), the rest complete.

Besides the RSS, ``sys.getallocatedblocks()`` after a collection: exact,
it counts the Python objects a leak keeps, which the RSS's page-sized
noise could hide. Exit status 1 when the total RSS growth is over
``--bound-kib``, that of the blocks over ``--blocks-bound`` (0: report
only), or an operation is left pending. The figures go to stdout (and ``--out``) as one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict

import appnorth
from appnorth import _lib, _ops, aio


def rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def track_calls(events: appnorth.Events) -> Callable[[int], None]:
    def run(n: int) -> None:
        track = events.track
        for i in range(n):
            track("probe", {"i": i, "level": "forest"})
    return run


def config_calls(config: appnorth.Config) -> Callable[[int], None]:
    def run(n: int) -> None:
        for i in range(n // 4):
            config.get_string("theme")
            config.get_int("limit")
            config.get_bool("beta")
            config.get_json_text("colors")
    return run


def async_calls(client: appnorth.Client) -> Callable[[int], None]:
    async def batch(count: int) -> None:
        tasks = [asyncio.ensure_future(aio.list_boards(client)) for _ in range(count)]
        for t in tasks[::10]:
            t.cancel()
        for t in tasks:
            try:
                result = await t
                assert "boards" in result
            except (asyncio.CancelledError, appnorth.CancelledError):
                pass

    async def main(n: int) -> None:
        for start in range(0, n, 64):
            await batch(min(64, n - start))

    def run(n: int) -> None:
        asyncio.run(main(n))
    return run


def measure(name: str, run: Callable[[int], None], warmup: int, calls: int) -> Dict[str, Any]:
    run(warmup)
    gc.collect()
    before, blocks = rss_kib(), sys.getallocatedblocks()
    started = time.monotonic()
    run(calls)
    seconds = time.monotonic() - started
    gc.collect()
    after, blocks = rss_kib(), sys.getallocatedblocks() - blocks
    row = {"kind": name, "calls": calls, "warmup": warmup, "rss_before_kib": before,
           "rss_after_kib": after, "growth_kib": after - before, "blocks_growth": blocks,
           "seconds": round(seconds, 1)}
    print(f"python {name}: {calls} calls after {warmup}: RSS {before} -> {after} KiB "
          f"({after - before:+d} KiB; {blocks:+d} Python objects' blocks, {seconds:.1f} s)", file=sys.stderr)
    return row


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("server")
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--warmup", type=int, default=100_000)
    parser.add_argument("--async-share", type=float, default=0.1,
                        help="non-blocking reads run calls*share (each is a real request to the dev server)")
    parser.add_argument("--bound-kib", type=int, default=0)
    parser.add_argument("--blocks-bound", type=int, default=0,
                        help="most growth of sys.getallocatedblocks(): exact, it counts the Python objects kept")
    parser.add_argument("--out")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="appnorth-leak-"))
    bundle = work / "bundle.json"
    bundle.write_text(json.dumps({"theme": "dark", "limit": 5, "beta": True, "colors": ["red", "green"]}))
    offline = appnorth.Client(f"http://127.0.0.1:{closed_port()}", "leakprobe", api_timeout_ms=1000, logger=False)
    online = appnorth.Client(args.server, "leakprobe", api_timeout_ms=10000)
    events = appnorth.Events(offline, work / "events", flush_interval_ms=86_400_000, batch_threshold=10_000,
                             max_events=10_000_000, max_bytes=1 << 30)
    config = appnorth.Config(offline, None, bundled_path=bundle)
    async_calls_n = int(args.calls * args.async_share)
    rows = [
        measure("track", track_calls(events), args.warmup, args.calls),
        measure("config", config_calls(config), args.warmup, args.calls),
        measure("async", async_calls(online), int(args.warmup * args.async_share), async_calls_n),
    ]
    events.close(0)
    config.close()
    offline.close()
    online.close()
    total = sum(r["growth_kib"] for r in rows)
    blocks = sum(r["blocks_growth"] for r in rows)
    leftovers = {"pending_operations": _ops.pending(), "pending_pins": _lib.pending_pins()}
    result = {"bench": "leak_python", "python": sys.version.split()[0], "rows": rows,
              "growth_kib": total, "blocks_growth": blocks, "bound_kib": args.bound_kib,
              "blocks_bound": args.blocks_bound, **leftovers}
    text = json.dumps(result)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    ok = (leftovers["pending_operations"] == 0 and (args.bound_kib == 0 or total <= args.bound_kib)
          and (args.blocks_bound == 0 or blocks <= args.blocks_bound))
    print(f"python: RSS growth {total} KiB in all (bound {args.bound_kib or 'none'} KiB); {blocks:+d} blocks "
          f"(bound {args.blocks_bound or 'none'}); "
          f"{leftovers['pending_operations']} operations left pending: {'ok' if ok else 'FAILED'}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
