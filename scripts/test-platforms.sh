#!/usr/bin/env bash
# make test-platforms: the release artifacts run on the oldest and the
# newest Debian (docs/platforms.md). In a Debian 11 root (the floor: glibc
# 2.31, the Steam Linux Runtime 3's base) and a Debian 13 root (glibc 2.41),
# made by scripts/platform-roots.sh and cached between runs:
#   - the README's C quickstart and the C examples are built with the root's
#     own compiler against dist/ and run (every symbol bound at load,
#     LD_BIND_NOW=1) against the dev server on the host's loopback;
#   - the wheel installs with the root's pip into a venv, runs the README's
#     Python quickstart, forces the fallbacks for the libcurl 7.74 it bundles
#     (Tests/platforms/fallbacks.py), and a track() kill -9 round loses nothing;
#   - the Debian packages (make deb) install with apt, the C quickstart builds
#     with pkg-config alone and runs, and they purge cleanly; on this machine
#     as well, with a CMake consumer (Tests/platforms/debs.sh).
# The dev server: $APPNORTH_TEST_SERVER, seeded (DEVSERVER_FLAGS=--seed-demo).
# A root that cannot be made fails this, with the reason. Needs root
# (chroot); otherwise it fails and says so.
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
cd "$top"
: "${APPNORTH_TEST_SERVER:?run through scripts/with-devserver.sh}"
[ "$(id -u)" = 0 ] || { echo "test-platforms: needs root (debootstrap and chroot); run: sudo make test-platforms" >&2; exit 1; }
wheel="$(ls dist/appnorth-*.whl)"
# kill -9 rounds per root: 1 in make test, 3 in make test-soak (APPNORTH_SOAK=1).
if [ "${APPNORTH_SOAK:-0}" != 0 ] && [ -n "${APPNORTH_SOAK:-}" ]; then soak_rounds=3; else soak_rounds=1; fi
rounds="${APPNORTH_PLATFORM_KILL_ROUNDS:-$soak_rounds}"

in_root() { scripts/platform-roots.sh run "$name" "$2"; }

for name in debian11 debian13; do
    started=$SECONDS
    root="$(scripts/platform-roots.sh ensure "$name")"
    run="$root/run/appnorth"
    rm -rf "$run"
    mkdir -p "$run/examples" "$run/dist"
    cp -a dist/include dist/lib "$run/dist/"
    cp examples/c/*.c examples/c/*.h "$run/examples/"
    scripts/readme-block.py README.md "Quickstart: C" c >"$run/quickstart.c"
    scripts/readme-block.py README.md "Quickstart: Python" python >"$run/quickstart.py"
    cp "$wheel" Tests/platforms/kill_round.py Tests/platforms/fallbacks.py "$run/"
    versions="$(in_root "$root" 'ldd --version | head -n 1 | grep -oE "[0-9.]+$"; python3 -c "import platform; print(platform.python_version())"; curl-config --version 2>/dev/null || pkg-config --modversion libcurl' | tr '\n' ' ')"
    echo "platforms: $name (glibc, Python, curl: $versions)"
    in_root "$root" "set -e; cd /run/appnorth; mkdir -p bin
        for src in quickstart.c examples/*.c; do
            gcc -std=gnu99 -O1 -Wall -Idist/include -o bin/\$(basename \$src .c) \$src -Ldist/lib -lappnorth \
                -Wl,-rpath,/run/appnorth/dist/lib \$(pkg-config --libs jansson libcurl) -lpthread
        done"
    url="$APPNORTH_TEST_SERVER"
    in_root "$root" "set -e; cd /run/appnorth; export LD_BIND_NOW=1
        bin/quickstart $url | grep -q '\"Dark mode\"' || { echo 'the C quickstart found no Dark mode idea'; exit 1; }
        d=\$(mktemp -d)
        for ex in boards offline_comment track_events remote_config frame_loop; do
            case \$ex in boards|frame_loop) dir= ;; *) dir=\$d/\$ex ;; esac
            bin/\$ex $url demo \$dir > log-\$ex.txt 2>&1 || { cat log-\$ex.txt; echo \"example \$ex failed\"; exit 1; }
        done" || { echo "test-platforms: $name: the C programs failed" >&2; exit 1; }
    echo "platforms: $name: the README's C quickstart and 5 C examples ran"
    in_root "$root" "set -e; cd /run/appnorth; python3 -m venv venv
        venv/bin/pip install -q --no-index --disable-pip-version-check $(basename "$wheel")
        APPNORTH_URL=$url venv/bin/python quickstart.py > log-quickstart-py.txt
        venv/bin/python fallbacks.py $url demo /run/appnorth/fallback-data
        venv/bin/python kill_round.py $url demo /run/appnorth/kill-data $rounds $name" \
        || { echo "test-platforms: $name: the wheel failed" >&2; exit 1; }
    echo "platforms: $name: the wheel installed with the root's pip and ran the Python quickstart ($((SECONDS - started)) s)"
    Tests/platforms/debs.sh "$root"
done
# The Debian packages on this machine too, where cmake is.
Tests/platforms/debs.sh /
