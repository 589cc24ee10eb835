# Sourced by scripts/ensure-deps.sh and scripts/run-host-examples.sh: finds a
# toolchain that actually works, not only one that is on PATH.
#
#   toolchain NAME 'CHECK' PACKAGE...
#
# tries every NAME on PATH in order, then /usr/bin/NAME (where Debian's
# packages put it, whatever PATH says), running CHECK with
# {} replaced by the candidate's path (for instance '{} --version'), and
# sets TOOL to the first that passes. When none passes and we are root with
# apt-get, it installs the Debian PACKAGEs and tries again. Otherwise it
# returns 1 with TOOL_WHY naming what failed (the first line of the broken
# one's output) and the exact command to run. A rustup proxy with no default
# toolchain ("rustup could not choose a version of cargo to run") fails its
# check like any broken tool, so Debian's cargo replaces it.
# APPNORTH_NO_APT=1 never installs; APPNORTH_SYSTEM_BIN replaces /usr/bin
# (the tests of this file use both).

toolchain_try() { # NAME CHECK: sets TOOL, or TOOL_BROKEN with what failed
    local name="$1" check="$2" candidate out seen=""
    TOOL=""
    TOOL_BROKEN=""
    for candidate in $(type -ap "$name" 2>/dev/null) "${APPNORTH_SYSTEM_BIN:-/usr/bin}/$name"; do
        [ -x "$candidate" ] || continue
        case " $seen " in *" $candidate "*) continue ;; esac
        seen="$seen $candidate"
        if out="$(timeout 60 sh -c "${check//\{\}/\"$candidate\"}" 2>&1 </dev/null)"; then
            TOOL="$candidate"
            return 0
        fi
        TOOL_BROKEN="${TOOL_BROKEN:+$TOOL_BROKEN; }$candidate fails (${check//\{\}/$name}: $(printf '%s\n' "$out" | grep -m1 . || echo "no output"))"
    done
    return 1
}

toolchain() { # NAME CHECK PACKAGE...
    local name="$1" check="$2"
    shift 2
    TOOL_WHY=""
    toolchain_try "$name" "$check" && return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && [ "${APPNORTH_NO_APT:-0}" != 1 ]; then
        echo "toolchains: ${TOOL_BROKEN:-no $name on PATH}; installing Debian's $*" >&2
        if { DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null 2>&1 \
               || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null; }; } \
           && toolchain_try "$name" "$check"; then
            return 0
        fi
    fi
    TOOL_WHY="${TOOL_BROKEN:-no $name on PATH}; run: sudo apt-get install -y $*"
    if { [ "$name" = cargo ] || [ "$name" = rustc ]; } && command -v rustup >/dev/null; then
        TOOL_WHY="$TOOL_WHY (or: rustup default stable)"
    fi
    return 1
}

# Every toolchain the host examples use, checked (and installed as root).
# Sets TC_<name> (TC_cxx for c++) to the working tool's path, or adds "<example>: <why>" to
# TC_SKIPPED for an example that cannot run here.
host_toolchains() {
    TC_SKIPPED=()
    local spec name check packages example
    while IFS='|' read -r example name check packages; do
        [ -n "$name" ] || continue
        # shellcheck disable=SC2086 # PACKAGES is a word list
        if toolchain "$name" "$check" $packages; then
            printf -v "TC_${name//+/x}" '%s' "$TOOL"
        else
            printf -v "TC_${name//+/x}" '%s' ""
            TC_SKIPPED+=("$example: $TOOL_WHY")
        fi
    done <<'TOOLS'
C++|c++|{} --version|g++
Go|go|{} version|golang-go
Rust|cargo|{} --version|cargo
Rust|rustc|{} --version|rustc
C#|mcs|{} --version|mono-mcs
C#|mono|{} --version|mono-runtime
LuaJIT|luajit|{} -e "local ffi = require('ffi')"|luajit
Java|javac|{} -version|openjdk-17-jdk-headless
Java|java|{} -version && test -r /usr/share/java/jna.jar|openjdk-17-jdk-headless libjna-java
Ruby|ruby|{} -rffi -e 0|ruby ruby-ffi
Node|node|{} -e "require('node:worker_threads')" && test -r /usr/include/node/node_api.h|nodejs libnode-dev
Node|npm|{} --version|npm
Node types|tsc|{} --version|node-typescript
TOOLS
}
