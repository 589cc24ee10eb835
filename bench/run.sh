#!/usr/bin/env bash
# `make bench`: build a release library, start the local dev server, run
# every benchmark, print the markdown table and write the results
# (bench/results/latest.md, latest.json and <timestamp>-<commit>.json).
#
# Benchmarks measure and report: this script fails only when something
# cannot run, never because a figure misses its target.
#
#   BENCH_QUICK=1   much smaller counts, for checking the harness (the
#                   figures are then not comparable; results go to
#                   bench/build/quick/ instead of bench/results/)
#   BENCH_PROFILE=0 skip the profile of track() (run when a track() target
#                   is missed, or always with BENCH_PROFILE=1)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
started=$(date +%s)
build=bench/build
out=$build/out
results=bench/results
[ "${BENCH_QUICK:-0}" = 1 ] && results=$build/quick
rm -rf "$out"
mkdir -p "$out" "$results"
export BENCH_TMP="${BENCH_TMP:-$(mktemp -d /tmp/appnorth-bench-XXXXXX)}"
trap 'rm -rf "$BENCH_TMP"' EXIT
export PYTHONDONTWRITEBYTECODE=1

step() { printf '\n== %s\n' "$*" >&2; }

# --- 1. the release library (self-contained, stripped: what ships) --------------
step "release library (make dist)"
make --no-print-directory dist >&2
lib="$(readlink -f dist/lib/libappnorth.so)"

# --- 2. the C programs --------------------------------------------------------------
step "C benchmarks"
cc="${CC:-cc}"
cflags=(-O2 -g -Wall -Wextra -Idist/include)
libs=(-Ldist/lib -lappnorth "-Wl,-rpath,$root/dist/lib" $(pkg-config --libs sqlite3 libcurl jansson) -lpthread -lm)
have_config=0
if grep -q appnorth_config_new dist/include/appnorth.h; then have_config=1; fi
mkdir -p $build
for prog in track flush offline memory async; do
    $cc "${cflags[@]}" -o $build/bench_$prog bench/c/bench_$prog.c "${libs[@]}"
done
# The flush's receiver that is not the bottleneck (bench/c/event_sink.c).
$cc "${cflags[@]}" -o $build/event_sink bench/c/event_sink.c $(pkg-config --libs jansson zlib)
if [ $have_config = 1 ]; then
    $cc "${cflags[@]}" -DBENCH_CONFIG_MAIN -o $build/bench_config bench/c/bench_config.c "${libs[@]}"
    $cc "${cflags[@]}" -DBENCH_HAVE_CONFIG -o $build/bench_coldstart bench/c/bench_coldstart.c bench/c/bench_config.c "${libs[@]}"
    $cc "${cflags[@]}" -o $build/bench_http2 bench/c/bench_http2.c "${libs[@]}"
    $cc "${cflags[@]}" -o $build/bench_dispatch bench/c/bench_dispatch.c "${libs[@]}"
else
    echo "remote config is not in this build (no appnorth_config_new in the header): its rows are skipped" >&2
    $cc "${cflags[@]}" -o $build/bench_coldstart bench/c/bench_coldstart.c "${libs[@]}"
fi

# --- 3. the Python peers, in the benchmark's own virtualenv ---------------------------
step "Python virtualenv (bench/.venv)"
venv=bench/.venv
if ! $venv/bin/python -c "import posthog, segment.analytics, persistqueue" 2>/dev/null; then
    python3 -m venv $venv
    $venv/bin/pip install -q --disable-pip-version-check -r bench/requirements.txt >&2
fi
export APPNORTH_LIBRARY="$lib"
export PYTHONPATH="$root/bindings/python"

# --- 4. run, with the dev server up ----------------------------------------------------
if [ "${BENCH_QUICK:-0}" = 1 ]; then
    export BENCH_TRACK_EVENTS=4000 BENCH_TRACK_ROUNDS=4 BENCH_FLUSH_EVENTS=1000 BENCH_FLUSH_ROUNDS=1 \
           BENCH_OFFLINE_ROUNDS=1 BENCH_COLDSTART_RUNS=3 BENCH_MEMORY_RUNS=1 \
           BENCH_HTTP2_REQUESTS=30 BENCH_HTTP2_EVENTS=300 BENCH_HTTP2_ROUNDS=1 BENCH_IDLE_SECONDS=5 \
           BENCH_NODE_READS=50 BENCH_NODE_TRACKS=2000
    py_rounds=1 py_runs=3 leak_calls=20000
else
    py_rounds=5 py_runs=20 leak_calls=1000000
fi
# The Node.js package (scripts/node-package.sh), when node and its headers work.
have_node=0
if command -v node >/dev/null && [ -r /usr/include/node/node_api.h ] \
        && scripts/node-package.sh dist "$build/node" >&2; then
    have_node=1
else
    echo "node or its headers (/usr/include/node) are missing: the Node row is skipped" >&2
fi
export have_config have_node py_rounds py_runs leak_calls build out venv
scripts/with-devserver.sh bash -c '
    set -euo pipefail
    run() { local name=$1; shift; printf "\n== %s\n" "$name" >&2; "$@" > "$out/$name.json"; }
    run track $build/bench_track
    # The flush against the native sink (the figure judged), then one
    # end-to-end run against the dev server.
    coproc SINK { exec $build/event_sink 0; }
    read -r _ sink_port <&"${SINK[0]}"
    run flush $build/bench_flush "http://127.0.0.1:$sink_port" sink
    curl -s -X POST "http://127.0.0.1:$sink_port/sink/quit" > /dev/null || true
    wait "$SINK_PID" || true
    BENCH_FLUSH_ROUNDS=${BENCH_FLUSH_DEVSERVER_ROUNDS:-3} run flush_devserver $build/bench_flush "$APPNORTH_TEST_SERVER"
    run offline $build/bench_offline "$(command -v python3)" devserver/appnorth_devserver.py
    if [ "$have_config" = 1 ]; then
        run config $build/bench_config "$APPNORTH_TEST_SERVER"
        run http2 bench/http2.sh $build
        run dispatch $build/bench_dispatch "$APPNORTH_TEST_SERVER"
    fi
    run async $build/bench_async "$APPNORTH_TEST_SERVER"
    if [ "$have_node" = 1 ]; then run node node bench/node/bench_node.js "$APPNORTH_TEST_SERVER" "$build/node/appnorth"; fi
    run coldstart $build/bench_coldstart "$APPNORTH_TEST_SERVER"
    run memory $build/bench_memory
    printf "\n== python\n" >&2
    $venv/bin/python bench/py/bench_python.py track --rounds "$py_rounds" --out "$out/python_track.json"
    $venv/bin/python bench/py/bench_python.py import --runs "$py_runs" --out "$out/python_import.json"
    # The bindings memory probes: 10^6 calls of each kind (non-blocking reads: a tenth), after a tenth as warm-up.
    printf "\n== leak probes\n" >&2
    $venv/bin/python bench/py/leak_probe.py "$APPNORTH_TEST_SERVER" --calls "$leak_calls" \
        --warmup $((leak_calls / 10)) --out "$out/leak_python.json" >/dev/null
    if [ "$have_node" = 1 ]; then
        node --expose-gc --max-semi-space-size=1 bench/node/leak_probe.js "$APPNORTH_TEST_SERVER" "$build/node/appnorth" \
            --calls "$leak_calls" --warmup $((leak_calls / 10)) --out "$out/leak_node.json" >/dev/null
    fi
'

# --- 4b. a fleet recovering from an outage ---------------------------------------------
# It runs its own dev server, since the outage stops and restarts it.
step "fleet recovering from an outage (Tests/fleet/fleet.py)"
$cc "${cflags[@]}" -o $build/fleet_client Tests/fleet/fleet_client.c "${libs[@]}"
fleet_args=(--profile bench)
[ "${BENCH_QUICK:-0}" = 1 ] && fleet_args=(--profile test)
[ -n "${BENCH_FLEET_CLIENTS:-}" ] && fleet_args+=(--clients "$BENCH_FLEET_CLIENTS")
python3 Tests/fleet/fleet.py --client $build/fleet_client "${fleet_args[@]}" --out $out/fleet.json >&2

# --- 5. size of what ships -------------------------------------------------------------
printf '{"bench":"size","bytes":%s,"file":"%s"}\n' "$(stat -c %s "$lib")" "dist/lib/$(basename "$lib")" > $out/size.json

# --- 6. a profile of track() when its target is missed ----------------------------------
if [ "${BENCH_PROFILE:-auto}" != 0 ]; then
    missed=$(python3 -c "import json,sys; d=json.load(open('$out/track.json'))['single']; l=d['library']; print(1 if l['p50_us'] > 2 or l['p99_us'] > 10 or d['ratio_p50'] > 1/6 else 0)")
    if [ "$missed" = 1 ] || [ "${BENCH_PROFILE:-auto}" = 1 ]; then
        step "profile of track() (target missed)"
        events=2000
        [ "${BENCH_QUICK:-0}" = 1 ] && events=300
        python3 bench/profile_track.py $build/bench_track $out/profile.json "$results/latest-profile.txt" \
            --events $events || echo "profile failed; the table is written without it" >&2
    fi
fi

# --- 7. the table ----------------------------------------------------------------------
elapsed=$(( $(date +%s) - started ))
python3 bench/report.py --inputs $out --results "$results" --elapsed "$elapsed" --have-config "$have_config"
