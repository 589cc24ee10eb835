"""Profile track() from C against the bare SQLite insert, for the report.

Runs ``bench_track profile library N`` and ``bench_track profile bare N``
with the unstripped release library (.build/floor/release/libappnorth.so,
the build that make dist strips; .build/release/libappnorth.so if there is
no floor build). The tool is chosen as the issue says:
``perf stat -e instructions true`` tells whether hardware counters work;
if they do, ``perf stat`` counts instructions per event and ``perf record``
gives the hot symbols; if not, ``valgrind --tool=callgrind`` counts
instructions exactly (and repeatably, whatever else the machine does).

Writes a JSON summary (instructions per event on both sides, the hot
functions inside track() with their inclusive share) and the tool's full
annotated output next to it.

usage: profile_track.py BENCH_TRACK_BINARY OUT_JSON OUT_TEXT [--events N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WARMUP = 100  # bench_track's profile mode tracks this many events first


def perf_counters_work() -> bool:
    if not shutil.which("perf"):
        return False
    proc = subprocess.run(["perf", "stat", "-x,", "-e", "instructions", "true"], capture_output=True, text=True)
    return proc.returncode == 0 and "<not supported>" not in proc.stderr and "instructions" in proc.stderr


def demangler():
    swift = shutil.which("swift-demangle") or shutil.which("swift")
    if not swift:
        return lambda names: names
    cmd = [swift, "--simplified"] if swift.endswith("swift-demangle") else [swift, "demangle", "--simplified"]

    def run(names: List[str]) -> List[str]:
        proc = subprocess.run(cmd, input="\n".join(names) + "\n", capture_output=True, text=True)
        out = proc.stdout.splitlines()
        return out if proc.returncode == 0 and len(out) == len(names) else names

    return run


def library_env(tmp: str) -> Dict[str, str]:
    # make dist builds against the platform floor in .build/floor (before,
    # this looked only in .build/release, missed it, and profiled the
    # stripped library: no function names).
    candidates = [os.path.join(ROOT, ".build", folder, "release", "libappnorth.so") for folder in ("floor", "")]
    unstripped = next((path for path in candidates if os.path.exists(path)), "")
    env = dict(os.environ)
    if unstripped:
        os.symlink(unstripped, os.path.join(tmp, "libappnorth.so.0"))
        env["LD_LIBRARY_PATH"] = tmp + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


# ---- callgrind -----------------------------------------------------------------

LINE = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*?):(.*?)(?:\s+\[(.*)\])?$")


def callgrind(binary: str, side: str, events: int, env: Dict[str, str], tmp: str,
              collect: Optional[str] = None) -> Tuple[Dict[str, int], str]:
    """`collect`: count only inside that function (its calls and what
    they call), leaving out set-up, the timing loop and other threads."""
    out = os.path.join(tmp, f"callgrind.{side}")
    toggle = [f"--toggle-collect={collect}"] if collect else []
    subprocess.run(["valgrind", "--tool=callgrind", *toggle, f"--callgrind-out-file={out}", binary, "profile", side,
                    str(events)], env=env, check=True, capture_output=True)
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", "--auto=no", out], capture_output=True,
                          text=True, check=True).stdout
    inclusive: Dict[str, int] = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if not m or "ld-linux" in (m.group(4) or "") or "/elf/" in m.group(2):
            continue  # the dynamic loader runs before main: not track()'s
        count, name = int(m.group(1).replace(",", "")), m.group(3).strip()
        inclusive[name] = max(inclusive.get(name, 0), count)
    return inclusive, text


def run_callgrind(binary: str, events: int, tmp: str) -> Dict[str, object]:
    env = library_env(tmp)
    # track() alone: the client and handle set-up, the rounds' consent
    # changes (the purge, the import) and the upload thread are not counted.
    lib, lib_text = callgrind(binary, "library", events, env, tmp, collect="appnorth_events_track")
    bare, _ = callgrind(binary, "bare", events, env, tmp)
    track_total = lib.get("appnorth_events_track", 0)
    lib_per_event = track_total / (events + WARMUP)
    bare_per_event = bare.get("time_bare", 0) / events
    names = list(lib)
    pretty = dict(zip(names, demangler()(names)))
    wrappers = ("appnorth_events_track", "time_library", "main", "guarded", "withEvents", "withOptions",
                "AppNorthEvents.track(", "(below main)", "__libc_start", "profile_main")
    merged: Dict[str, int] = {}
    for name, count in lib.items():
        label = pretty[name]
        if count >= track_total * 0.98 or any(w in label for w in wrappers) or label.startswith("0x"):
            continue
        if label.startswith("???") or label.startswith("closure #"):
            continue
        # SQLite's internals all sit under sqlite3_step: keep that one.
        if label.startswith("sqlite3") and label != "sqlite3_step":
            continue
        merged[label] = max(merged.get(label, 0), count)
    hot = sorted(merged.items(), key=lambda kv: -kv[1])[:12]
    return {
        "tool": "valgrind --tool=callgrind (perf stat -e instructions: not supported here)",
        "events": events,
        "library_instructions_per_event": round(lib_per_event),
        "bare_instructions_per_event": round(bare_per_event),
        "ratio_instructions": lib_per_event / bare_per_event if bare_per_event else None,
        "hot": [{"function": label, "share_of_track": count / track_total if track_total else 0,
                 "instructions_per_event": round(count / (events + WARMUP))} for label, count in hot],
        "text": lib_text,
    }


# ---- perf (when hardware counters work) ---------------------------------------


def perf_instructions(binary: str, side: str, events: int, env: Dict[str, str]) -> Optional[float]:
    proc = subprocess.run(["perf", "stat", "-x,", "-e", "instructions:u", binary, "profile", side, str(events)],
                          env=env, capture_output=True, text=True)
    for line in proc.stderr.splitlines():
        parts = line.split(",")
        if len(parts) > 2 and parts[2].startswith("instructions") and parts[0].isdigit():
            return float(parts[0])
    return None


def run_perf(binary: str, events: int, tmp: str) -> Dict[str, object]:
    env = library_env(tmp)
    # Whole-process counts, so subtract a run with no events (setup cost).
    base_lib = perf_instructions(binary, "library", 0, env) or 0
    base_bare = perf_instructions(binary, "bare", 0, env) or 0
    lib = (perf_instructions(binary, "library", events, env) or 0) - base_lib
    bare = (perf_instructions(binary, "bare", events, env) or 0) - base_bare
    data = os.path.join(tmp, "perf.data")
    subprocess.run(["perf", "record", "-q", "-g", "-o", data, binary, "profile", "library", str(events)], env=env,
                   capture_output=True)
    text = subprocess.run(["perf", "report", "-i", data, "--stdio", "--children", "--sort", "sym", "-g", "none"],
                          capture_output=True, text=True).stdout
    hot = []
    for line in text.splitlines():
        m = re.match(r"^\s*([\d.]+)%\s+([\d.]+)%\s+\[[.k]\]\s+(.*)$", line)
        if m and len(hot) < 14:
            hot.append({"function": demangler()([m.group(3).strip()])[0],
                        "share_of_track": float(m.group(1)) / 100, "instructions_per_event": None})
    return {
        "tool": "perf stat -e instructions:u, perf record",
        "events": events,
        "library_instructions_per_event": round(lib / events) if events else None,
        "bare_instructions_per_event": round(bare / events) if events else None,
        "ratio_instructions": lib / bare if bare else None,
        "hot": hot,
        "text": text,
    }


def readable(text: str) -> str:
    """The tool's listing cut to entries of at least 0.3% and demangled."""
    kept = []
    for line in text.splitlines():
        m = re.match(r"^\s*[\d,]+\s+\(\s*([\d.]+)%\)", line) or re.match(r"^\s*([\d.]+)%", line)
        if m and float(m.group(1)) < 0.3:
            continue
        kept.append(line)
    out = "\n".join(kept) + "\n"
    swift = shutil.which("swift-demangle")
    if swift:
        proc = subprocess.run([swift, "--simplified"], input=out, capture_output=True, text=True)
        if proc.returncode == 0 and proc.stdout:
            out = proc.stdout
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("out_json")
    parser.add_argument("out_text")
    parser.add_argument("--events", type=int, default=2000)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="appnorth-bench-profile-")
    try:
        if perf_counters_work():
            result = run_perf(args.binary, args.events, tmp)
        elif shutil.which("valgrind"):
            result = run_callgrind(args.binary, args.events, tmp)
        else:
            print("profile: neither perf counters nor valgrind available", file=sys.stderr)
            return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = readable(result.pop("text"))
    with open(args.out_text, "w") as f:
        f.write(text)
    result["bench"] = "profile_track"
    with open(args.out_json, "w") as f:
        json.dump(result, f)
    print(f"profile: track() {result['library_instructions_per_event']} instructions/event, bare insert "
          f"{result['bare_instructions_per_event']} ({result['tool']})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
