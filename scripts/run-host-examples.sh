#!/usr/bin/env bash
# Builds and runs the C++, Go, Rust, C#, Java, LuaJIT, Ruby and Node walkthroughs
# against the local server
# ($APPNORTH_TEST_SERVER, seeded with --seed-demo), each with a fresh data
# directory. Each toolchain must run, not only be on PATH (scripts/toolchains.sh;
# as root a broken one is replaced by Debian's package): a language without a
# working one is skipped with the command that installs it.
# The C++ one runs under AddressSanitizer and UndefinedBehaviorSanitizer.
# Usage: run-host-examples.sh BUILD_DIR DIST_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$1"
build="$(cd "$1" && pwd)"
dist="$(cd "$2" && pwd)"
data="$(mktemp -d)"
trap 'rm -rf "$data"' EXIT
export PKG_CONFIG_PATH="$dist/lib/pkgconfig"
ran=(); skipped=()
# shellcheck source=scripts/toolchains.sh
source "$root/scripts/toolchains.sh"
host_toolchains
usable() { # EXAMPLE: true when its toolchains work; else adds why to skipped
    local reason ok=0
    for reason in "${TC_SKIPPED[@]}"; do
        case "$reason" in "$1: "*) skipped+=("$reason"); ok=1 ;; esac
    done
    return $ok
}

walk() { # NAME COMMAND...: run the walkthroughs (COMMAND API_URL APP_ID DATA_DIR)
    local started=$SECONDS
    echo
    echo "=== $1 ==="
    "${@:2}" "$APPNORTH_TEST_SERVER" demo "$data/$1" 2>&1 || { echo "$1: the walkthrough failed"; exit 1; }
    echo "($1: ran in $((SECONDS - started)) s)"
    ran+=("$1")
}

if usable "C++"; then
    mkdir -p "$build/examples/cpp"
    # ASan's leak check stays on; UBSan findings abort the run.
    "${CXX:-$TC_cxx}" -std=c++17 -O1 -g -Wall -Wextra -Werror -pedantic -fsanitize=address,undefined \
        -fno-sanitize-recover=all -fno-omit-frame-pointer -I"$dist/include" \
        -o "$build/examples/cpp/walkthrough" "$root/examples/cpp/walkthrough.cpp" \
        -L"$dist/lib" -lappnorth -Wl,-rpath,"$dist/lib"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        walk "C++ (ASan+UBSan)" "$build/examples/cpp/walkthrough"
fi

if usable "Go"; then
    # Offline and inside the build tree: no module downloads, no ~/go.
    (cd "$root/examples/go" && GOCACHE="$build/go/cache" GOPATH="$build/go/path" GOPROXY=off GOFLAGS=-mod=mod \
        CGO_LDFLAGS="-Wl,-rpath,$dist/lib" "$TC_go" build -o "$build/examples/go/walkthrough" .)
    walk "Go (cgo)" "$build/examples/go/walkthrough"
fi

if usable "Rust"; then
    # The rustc beside the cargo that works (a rustup proxy first on PATH
    # may be the broken one).
    [ -x "$(dirname "$TC_cargo")/rustc" ] && export RUSTC="$(dirname "$TC_cargo")/rustc"
    "$TC_cargo" build --offline --release -q --manifest-path "$root/examples/rust/Cargo.toml" --target-dir "$build/rust"
    walk "Rust (extern C)" "$build/rust/release/walkthrough"
fi

# The C#, Java, LuaJIT and Ruby hosts run under LANG=C: their text must be
# UTF-8 because they say so, not because the locale does.
if usable "C#"; then
    mkdir -p "$build/examples/csharp"
    "$TC_mcs" -nologo -warnaserror -out:"$build/examples/csharp/walkthrough.exe" \
        "$root/examples/csharp/AppNorthNative.cs" "$root/examples/csharp/Walkthrough.cs"
    LANG=C LD_LIBRARY_PATH="$dist/lib" walk "C# (P/Invoke on Mono)" \
        "$TC_mono" "$build/examples/csharp/walkthrough.exe"
fi

if usable "Java"; then
    mkdir -p "$build/examples/java"
    "$TC_javac" -Xlint:all -Werror -cp /usr/share/java/jna.jar -d "$build/examples/java" "$root"/examples/java/*.java
    LANG=C walk "Java (JNA)" "$TC_java" -cp "$build/examples/java:/usr/share/java/jna.jar" \
        -Djna.library.path="$dist/lib" Walkthrough
fi

if usable "LuaJIT"; then
    LANG=C walk "LuaJIT (ffi)" "$TC_luajit" "$root/examples/luajit/walkthrough.lua" "$dist"
fi

if usable "Ruby"; then
    LANG=C APPNORTH_DIST="$dist" walk "Ruby (ffi gem)" "$TC_ruby" "$root/examples/ruby/walkthrough.rb"
fi

if usable "Node"; then
    # The npm package, staged in BUILD/node/appnorth (scripts/node-package.sh).
    PATH="$(dirname "$TC_node"):$PATH" "$root/scripts/node-package.sh" "$dist" "$build/node" >/dev/null
    LANG=C APPNORTH_NODE_PACKAGE="$build/node/appnorth" walk "Node (Node-API addon)" \
        "$TC_node" "$root/examples/node/walkthrough.js"
fi

echo
echo "host examples: ran ${#ran[@]} (${ran[*]:-none})${skipped:+; skipped: ${skipped[*]}}"
