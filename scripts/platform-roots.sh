#!/usr/bin/env bash
# The Debian roots that prove the platform floor (docs/platforms.md), made
# with debootstrap from Debian's registry and cached between runs on one
# machine, outside the checkout:
#
#   platform-roots.sh ensure NAME   make NAME's root unless a current one is cached; print its path
#   platform-roots.sh path NAME     print where NAME's root lives (made or not)
#   platform-roots.sh run NAME CMD  run the shell command CMD inside NAME's root (chroot, with /dev,
#                                   /proc and the host's network; a private mount namespace)
#
# NAME is debian11 (bullseye: glibc 2.31, GCC 10's libstdc++, curl 7.74,
# SQLite 3.34, jansson 2.13, Python 3.9; the floor, and the sysroot the
# release library is compiled and linked against) or debian13 (trixie:
# glibc 2.41, curl 8.14, SQLite 3.46, Python 3.13; the newest stable).
# Each root holds what building and running the C examples and installing
# the wheel need. A root is remade when its recipe below changes.
# The cache: $APPNORTH_ROOTS, else /var/cache/appnorth/roots as root, else
# ~/.cache/appnorth/roots. Making a root needs root (debootstrap); without
# it this says what to run.
set -euo pipefail

mirror="${APPNORTH_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
common="libc6-dev,gcc,pkg-config,libjansson-dev,libsqlite3-dev,zlib1g-dev,libcurl4-openssl-dev,python3,python3-venv,python3-pip"
recipe() {
    case "$1" in
        debian11) echo "bullseye $common,libstdc++-10-dev" ;;
        debian13) echo "trixie $common,libcurl4t64" ;;
        *) echo "platform-roots: unknown root '$1' (debian11 or debian13)" >&2; return 1 ;;
    esac
}

cache="${APPNORTH_ROOTS:-}"
if [ -z "$cache" ]; then
    if [ "$(id -u)" = 0 ]; then cache=/var/cache/appnorth/roots; else cache="${XDG_CACHE_HOME:-$HOME/.cache}/appnorth/roots"; fi
fi

# debootstrap's symlinks are absolute (/lib/x86_64-linux-gnu/...): inside a
# sysroot they would name the build machine's files. Relative ones name the
# root's own, in a chroot and to a linker given --sysroot alike.
relative_links() {
    python3 - "$1" <<'PY'
import os, sys
root = os.path.realpath(sys.argv[1])
for top in ("usr/lib", "usr/lib64", "usr/include"):
    for folder, dirs, files in os.walk(os.path.join(root, top)):
        for name in dirs + files:
            path = os.path.join(folder, name)
            target = os.readlink(path) if os.path.islink(path) else ""
            if target.startswith("/") and not target.startswith("/opt/"):
                os.unlink(path)
                os.symlink(os.path.relpath(root + target, folder), path)
PY
}

ensure() {
    local name="$1" want root suite packages
    want="$(recipe "$name")"
    root="$cache/$name"
    if [ "$(cat "$root/.appnorth-recipe" 2>/dev/null)" = "$want" ]; then echo "$root"; return 0; fi
    if [ "$(id -u)" != 0 ]; then
        echo "platform-roots: the $name root ($root) is missing; making it needs root:" >&2
        echo "  sudo apt-get install -y debootstrap && sudo APPNORTH_ROOTS=$cache $0 ensure $name" >&2
        return 1
    fi
    command -v debootstrap >/dev/null || {
        apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null
    }
    read -r suite packages <<<"$want"
    mkdir -p "$cache"
    local started=$SECONDS fresh="$root.new.$$"
    rm -rf "$fresh"
    echo "platform-roots: making the $name root ($suite) in $root" >&2
    if ! debootstrap --variant=minbase --include="$packages" "$suite" "$fresh" "$mirror" >"$fresh.log" 2>&1; then
        echo "platform-roots: debootstrap of $suite from $mirror failed; the last lines of its log ($fresh.log):" >&2
        tail -n 15 "$fresh.log" >&2
        return 1
    fi
    relative_links "$fresh"
    echo "$want" >"$fresh/.appnorth-recipe"
    rm -rf "$root" "$fresh.log"
    mv "$fresh" "$root"
    echo "platform-roots: $name made in $((SECONDS - started)) s" >&2
    echo "$root"
}

in_root() { # ROOT COMMAND
    unshare -m sh -c 'mount --make-rprivate / && mount --rbind /dev "$1/dev" && mount -t proc proc "$1/proc" \
        && cp /etc/resolv.conf "$1/etc/resolv.conf" 2>/dev/null; exec chroot "$1" /bin/sh -c "$2"' in_root "$1" "$2"
}

case "${1:-}" in
    ensure) [ $# -eq 2 ] || exit 2
            mkdir -p "$cache" 2>/dev/null || true
            # One maker at a time per cache (two make runs on one machine).
            exec 9>"$cache/.lock" 2>/dev/null || { ensure "$2"; exit; }
            flock 9
            ensure "$2" ;;
    run) [ $# -eq 3 ] || exit 2
         root="$("$0" ensure "$2")"
         in_root "$root" "$3" ;;
    path) [ $# -eq 2 ] && recipe "$2" >/dev/null && echo "$cache/$2" ;;
    *) echo "usage: $0 ensure|path|run debian11|debian13 [COMMAND]" >&2; exit 2 ;;
esac
