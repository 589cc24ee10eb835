#!/usr/bin/env python3
"""A fleet of installs recovering from one outage, measured at the server.

Starts the dev server on a fixed port with a database file, registers one
credential per install and publishes a config, then starts PROCESSES
fleet_client processes that run CLIENTS library instances in all (each with
its own data directory, events queue and live config stream). Once every
stream is connected, it stops the server (the outage), has every install
queue a few events, waits a fixed time, and starts the server again on the
same port and database, armed to answer 503 with a Retry-After for the first
part of the recovery. It waits until every event is stored and every stream
is back, then reads the server's request log and stored events and reports:

- the peak request rate after recovery (sliding windows);
- the time until every queued event was stored, and whether each was stored
  exactly once (nothing lost, no install's event twice);
- how the stream reconnects spread out (percentiles after recovery);
- whether every install waited out every Retry-After it was given, per
  channel (the events uploader and the config thread each send one request
  at a time).

Runs once with the shipped jitter and once with it turned off through the
jitter options at 0 % (--jitter both), and reports the factor by which jitter
flattens the peak. --check turns the findings into a pass/fail (make test);
docs/outages-and-fleets.md explains the figures.

    fleet.py --client build/tests/fleet_client --profile test --check
    fleet.py --client bench/build/fleet_client --profile bench --out out.json
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, asdict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVER = os.path.join(ROOT, "devserver", "appnorth_devserver.py")
APP = "fleet"


@dataclass
class Profile:
    """Intervals of one run. `scale` is the share of the seed's intervals
    (retry 1 s, flush 30 s, reconnect 1-60 s, poll 60 s) the run uses."""
    clients: int
    processes: int
    events: int             # queued per install during the outage
    scale: float
    retry_base_ms: int
    flush_ms: int
    backoff_base_ms: int
    backoff_max_ms: int
    poll_ms: int
    outage_s: float
    retry_after_s: int      # the server's Retry-After during the fault window
    fault_ms: int           # how long after the restart the server answers 503
    deadline_s: float       # for the recovery to complete


PROFILES = {
    # make test: a reduced fleet (40 installs; 100 in make test-soak, see
    # main), short intervals; the reconnect cap is cut to 1.5 s so that the
    # run takes about half a minute per mode.
    "test": Profile(clients=40, processes=2, events=3, scale=0.1, retry_base_ms=100, flush_ms=3000,
                    backoff_base_ms=100, backoff_max_ms=1500, poll_ms=6000, outage_s=6, retry_after_s=1,
                    fault_ms=2000, deadline_s=90),
    # make bench: the full fleet, every seed interval at one fifth (a 100 s
    # outage and a 10 s Retry-After for 20 s at the shipped intervals).
    "bench": Profile(clients=500, processes=5, events=3, scale=0.2, retry_base_ms=200, flush_ms=6000,
                     backoff_base_ms=200, backoff_max_ms=12000, poll_ms=12000, outage_s=20, retry_after_s=2,
                     fault_ms=4000, deadline_s=120),
}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Fail(Exception):
    pass


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------

def free_port() -> int:
    """A free port below the kernel's ephemeral range (32768 and up), so no
    client connection made during the outage can take it."""
    for _ in range(200):
        port = random.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise Fail("no free port between 20000 and 32000")


class Server:
    def __init__(self, work: str, port: int):
        self.work, self.port = work, port
        self.db = os.path.join(work, "server.sqlite3")
        self.proc: subprocess.Popen | None = None
        self.started_ms = 0

    def start(self, faults: list[dict] | None = None) -> None:
        port_file = os.path.join(self.work, "port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        args = [sys.executable, SERVER, "--host", "127.0.0.1", "--port", str(self.port), "--db", self.db,
                "--port-file", port_file, "--request-log-limit", "1000000"]
        for fault in faults or []:
            args += ["--fault", json.dumps(fault)]
        for attempt in range(50):  # the port may still be held for a moment after the stop
            log = open(os.path.join(self.work, f"server-{attempt}.log"), "w")
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
            log.close()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and self.proc.poll() is None and not os.path.exists(port_file):
                time.sleep(0.005)
            if os.path.exists(port_file):
                self.started_ms = now_ms()
                return
            self.proc.kill()
            self.proc.wait()
            time.sleep(0.1)
        raise Fail(f"the dev server did not start on port {self.port}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def call(self, method: str, path: str, body: object | None = None) -> dict:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
            resp = conn.getresponse()
            raw = resp.read()
            if resp.status >= 300:
                raise Fail(f"{method} {path}: HTTP {resp.status} {raw[:200]!r}")
            return json.loads(raw) if raw else {}
        finally:
            conn.close()


# --------------------------------------------------------------------------
# The installs
# --------------------------------------------------------------------------

class ClientProcess:
    def __init__(self, binary: str, url: str, first: int, count: int, root: str, jitter: bool, p: Profile):
        args = [binary, url, APP, str(first), str(count), root, "1" if jitter else "0", str(p.events),
                str(p.retry_base_ms), str(p.flush_ms), str(p.backoff_base_ms), str(p.backoff_max_ms), str(p.poll_ms),
                str(p.flush_ms)]  # installs open over one flush interval: their timers are out of phase
        self.count = count
        self.stderr = open(os.path.join(root, f"clients-{first}.log"), "w")
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True, bufsize=1)

    def expect(self, word: str, timeout: float) -> str:
        """The rest of the next stdout line, which must start with `word`."""
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        line = result[0] if result else ""
        if not line.startswith(word + " "):
            raise Fail(f"fleet_client: expected '{word}', got {line!r} (exit {self.proc.poll()})")
        return line[len(word) + 1:].strip()

    def send(self, command: str) -> None:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.stderr.close()


def wait_for(what: str, condition, timeout: float, every: float = 0.25):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise Fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


# --------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------

def run(binary: str, p: Profile, jitter: bool, keep: bool) -> dict:
    work = tempfile.mkdtemp(prefix="appnorth-fleet-")
    server = Server(work, free_port())
    procs: list[ClientProcess] = []
    try:
        server.start()
        for i in range(p.clients):
            server.call("POST", "/admin/users", {"app": APP, "email": f"c{i}@fleet.test", "token": f"token-{i}"})
        server.call("POST", f"/admin/apps/{APP}/config", {"config": {"theme": "dark", "banner": "fleet"}})
        url = f"http://127.0.0.1:{server.port}"
        per = -(-p.clients // p.processes)
        for first in range(0, p.clients, per):
            procs.append(ClientProcess(binary, url, first, min(per, p.clients - first), work, jitter, p))
        for proc in procs:
            ready = int(proc.expect("ready", 180))
            if ready != proc.count:
                raise Fail(f"only {ready} of {proc.count} configs got the published config")
        wait_for("every stream connected",
                 lambda: server.call("GET", "/admin/health")["sse_streams"] >= p.clients, 60)

        # The outage: the server stops, every stream drops at once, events queue up.
        server.stop()
        down_ms = now_ms()
        for proc in procs:
            proc.send("track")
        tracked = sum(int(proc.expect("tracked", 60)) for proc in procs)
        expected = p.clients * p.events
        if tracked != expected:
            raise Fail(f"{tracked} of {expected} events were queued")
        time.sleep(max(0.0, p.outage_s - (now_ms() - down_ms) / 1000))

        # The recovery: same port, same database, 503 + Retry-After at first.
        fault = {"path_prefix": f"/v1/apps/{APP}/", "status": 503, "retry_after": str(p.retry_after_s),
                 "for_ms": p.fault_ms}
        server.start([fault])
        up_ms = server.started_ms

        def recovered() -> bool:
            stored = server.call("GET", f"/admin/apps/{APP}/state")["events"]
            return len(stored) >= expected and server.call("GET", "/admin/health")["sse_streams"] >= p.clients
        wait_for("every event stored and every stream back", recovered, p.deadline_s, every=0.5)
        for proc in procs:
            proc.send("quit")
        done = [json.loads(proc.expect("done", 120)) for proc in procs]
        log = server.call("GET", "/admin/requests?since=0")["requests"]
        stored = server.call("GET", f"/admin/apps/{APP}/state")["events"]
        if keep:
            with open(os.path.join(work, "requests.json"), "w") as f:
                json.dump({"down_ms": down_ms, "up_ms": up_ms, "requests": log, "events": stored}, f)
        result = analyse(p, jitter, log, stored, down_ms, up_ms)
        result["clients_report"] = {k: sum(d[k] for d in done) for k in ("opened", "tracked", "failures")}
        return result
    finally:
        for proc in procs:
            proc.close()
        server.stop()
        if keep:
            print(f"fleet: kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------
# What the server saw
# --------------------------------------------------------------------------

def percentiles(values: list[float]) -> dict:
    if not values:
        return {}
    v = sorted(values)

    def at(q: float) -> float:
        return round(v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))], 1)
    return {"p10": at(0.10), "p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "max": round(v[-1], 1),
            "spread_p10_p90": round(at(0.90) - at(0.10), 1)}


def peak(times: list[int], window_ms: int) -> int:
    """Most requests that started in any window of `window_ms`."""
    times = sorted(times)
    best, lo = 0, 0
    for hi, t in enumerate(times):
        while t - times[lo] >= window_ms:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def channel(entry: dict) -> str | None:
    """The install's thread that sent it: one request at a time on each."""
    path = entry["path"]
    if path.endswith("/events"):
        return "events"
    if path.endswith("/config") or path.endswith("/config/stream"):
        return "config"
    return None


def analyse(p: Profile, jitter: bool, log: list[dict], stored: list[dict], down_ms: int, up_ms: int) -> dict:
    api = [e for e in log if e["path"].startswith(f"/v1/apps/{APP}/")]
    recovery_ms = min([up_ms] + [e["time_ms"] for e in api])
    times = [e["time_ms"] for e in api]
    window = max(1, round(1000 * p.scale))  # one second at the shipped intervals

    # Exactly once: every (install, n) pair stored once, nothing else.
    expected = {(c, n) for c in range(p.clients) for n in range(p.events)}
    seen: dict[tuple[int, int], int] = {}
    for e in stored:
        props = json.loads(e["properties_raw"] or "{}")
        key = (props.get("client"), props.get("n"))
        seen[key] = seen.get(key, 0) + 1
    lost = len(expected - set(seen))
    duplicated = sum(1 for k, n in seen.items() if n > 1)
    unexpected = sum(1 for k in seen if k not in expected)
    last_stored = max((e["received_at"] for e in stored), default=recovery_ms)
    resent = sum(e.get("events_duplicates", 0) for e in api)

    # Streams: each install's first attempt and first success after recovery.
    by_client: dict[str, list[dict]] = {}
    for e in api:
        who = (e.get("headers") or {}).get("AppNorth-User-Email", "?")
        by_client.setdefault(who, []).append(e)
    first_try, connected = [], []
    violations, told = [], set()
    for who, entries in by_client.items():
        entries.sort(key=lambda e: (e["time_ms"], e["seq"]))
        streams = [e for e in entries if e["path"].endswith("/config/stream")]
        if streams:
            first_try.append(streams[0]["time_ms"] - recovery_ms)
        ok = [e for e in streams if e["status"] == 200]
        if ok:
            connected.append(ok[0]["time_ms"] - recovery_ms)
        for name in ("events", "config"):
            mine = [e for e in entries if channel(e) == name]
            for before, after in zip(mine, mine[1:]):
                if before["status"] not in (429, 503) or "retry_after" not in before:
                    continue
                told.add(who)
                # On the server's monotonic clock. Logged before the answer
                # left, so the install got the answer later still.
                answered = before["mono_ms"] + before["duration_ms"]
                wait_ms = int(before["retry_after"]) * 1000
                # 1 ms: the log rounds to microseconds.
                if after["mono_ms"] < answered + wait_ms - 1:
                    violations.append({"client": who, "channel": name, "answered_ms": answered,
                                       "retry_after_s": before["retry_after"], "next_ms": after["mono_ms"],
                                       "early_by_ms": round(answered + wait_ms - after["mono_ms"], 3)})
    refused = sum(1 for e in api if e["status"] == 503)
    return {
        "jitter": jitter,
        "profile": asdict(p),
        "outage_ms": recovery_ms - down_ms,
        "requests_after_recovery": len(api),
        "refused_with_retry_after": refused,
        "peak_window_ms": window,
        "peak_in_window": peak(times, window),
        "peak_per_second": peak(times, 1000),
        "peak_by_kind_in_window": {
            "stream": peak([e["time_ms"] for e in api if e["path"].endswith("/config/stream")], window),
            "poll": peak([e["time_ms"] for e in api if e["path"].endswith("/config")], window),
            "events": peak([e["time_ms"] for e in api if e["path"].endswith("/events")], window),
        },
        "events": {"expected": len(expected), "stored_rows": len(stored), "lost": lost,
                   "stored_twice": duplicated, "unexpected": unexpected, "resent_copies_deduplicated": resent,
                   "all_stored_after_ms": last_stored - recovery_ms},
        "streams": {"reconnected": len(connected), "first_attempt_ms": percentiles(first_try),
                    "connected_ms": percentiles(connected)},
        "retry_after": {"clients_told": len(told), "violations": len(violations), "examples": violations[:5]},
    }


# --------------------------------------------------------------------------

def check(results: list[dict], p: Profile) -> list[str]:
    problems = []
    for r in results:
        mode = "jitter" if r["jitter"] else "no jitter"
        ev = r["events"]
        if ev["lost"] or ev["stored_twice"] or ev["unexpected"] or ev["stored_rows"] != ev["expected"]:
            problems.append(f"{mode}: events not stored exactly once: {ev}")
        if r["streams"]["reconnected"] != p.clients:
            problems.append(f"{mode}: {r['streams']['reconnected']} of {p.clients} streams reconnected")
        ra = r["retry_after"]
        if ra["violations"]:
            problems.append(f"{mode}: {ra['violations']} requests came before their Retry-After: {ra['examples']}")
        # The check must be able to fail: most installs met the 503 window.
        if ra["clients_told"] < p.clients // 2:
            problems.append(f"{mode}: only {ra['clients_told']} installs were answered 503 + Retry-After")
        if r["clients_report"]["failures"]:
            problems.append(f"{mode}: the fleet clients reported failures: {r['clients_report']}")
    by = {r["jitter"]: r for r in results}
    if True in by and False in by:
        with_j = by[True]["streams"]["first_attempt_ms"].get("spread_p10_p90", 0)
        without = by[False]["streams"]["first_attempt_ms"].get("spread_p10_p90", 0)
        # Without jitter every stream retries in step (measured 30-50 ms
        # p10-p90, the server's own queueing); jitter spreads them over most
        # of the reconnect cap (about 900 ms). A factor of 3 leaves a wide
        # margin on a loaded machine.
        if not with_j >= 3 * max(without, 1):
            problems.append(f"jitter did not spread the reconnects: p10-p90 {with_j} ms with, {without} ms without")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--client", required=True, help="the fleet_client program")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="test")
    parser.add_argument("--clients", type=int, help="override the profile's install count")
    parser.add_argument("--processes", type=int, help="override the profile's process count")
    parser.add_argument("--jitter", choices=["both", "on", "off"], default="both")
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--check", action="store_true", help="fail unless delivery, Retry-After and spread hold")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, databases)")
    args = parser.parse_args()
    p = PROFILES[args.profile]
    if args.profile == "test" and os.environ.get("APPNORTH_SOAK", "0") not in ("", "0"):
        p.clients = 100  # make test-soak
    if args.clients:
        p.clients = args.clients
    if args.processes:
        p.processes = args.processes
    modes = {"both": [True, False], "on": [True], "off": [False]}[args.jitter]
    started = time.monotonic()
    results = []
    try:
        for jitter in modes:
            results.append(run(args.client, p, jitter, args.keep))
            r = results[-1]
            print(f"fleet ({'jitter' if jitter else 'no jitter'}): {p.clients} installs, "
                  f"outage {r['outage_ms'] / 1000:.1f} s; peak {r['peak_in_window']} requests in "
                  f"{r['peak_window_ms']} ms, {r['peak_per_second']}/s; all {r['events']['expected']} events stored "
                  f"{r['events']['all_stored_after_ms']} ms after recovery (lost {r['events']['lost']}, twice "
                  f"{r['events']['stored_twice']}, resent copies {r['events']['resent_copies_deduplicated']}); "
                  f"reconnects p10-p90 {r['streams']['first_attempt_ms'].get('spread_p10_p90')} ms; Retry-After "
                  f"given to {r['retry_after']['clients_told']} installs, broken {r['retry_after']['violations']}",
                  file=sys.stderr)
    except Fail as exc:
        print(f"fleet: FAILED: {exc}", file=sys.stderr)
        return 1
    summary = {"clients": p.clients, "processes": p.processes, "profile": args.profile, "runs": results,
               "seconds": round(time.monotonic() - started, 1)}
    by = {r["jitter"]: r for r in results}
    if True in by and False in by:
        summary["flattening"] = {
            "peak_in_window": round(by[False]["peak_in_window"] / max(1, by[True]["peak_in_window"]), 2),
            "peak_per_second": round(by[False]["peak_per_second"] / max(1, by[True]["peak_per_second"]), 2)}
    if args.out:  # one line: bench/report.py reads the last line of each file
        with open(args.out, "w") as f:
            f.write(json.dumps(summary) + "\n")
    if args.check:
        problems = check(results, p)
        for problem in problems:
            print(f"fleet: FAILED: {problem}", file=sys.stderr)
        if problems:
            return 1
        print(f"fleet: {p.clients} installs x {len(modes)} runs: every event stored once, every Retry-After "
              f"honoured, jitter spreads the reconnects ({summary['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
