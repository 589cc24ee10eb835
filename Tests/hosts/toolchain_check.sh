#!/usr/bin/env bash
# scripts/toolchains.sh against the broken toolchains a newcomer's machine
# has: a `cargo` first on PATH that is rustup's proxy with no default
# toolchain. Fake tools in a temporary folder; nothing is installed.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
fake="$(mktemp -d)"
trap 'rm -rf "$fake"' EXIT
mkdir -p "$fake/rustup" "$fake/good" "$fake/apt" "$fake/installed"
cat > "$fake/rustup/cargo" <<'EOF'
#!/bin/sh
echo "error: rustup could not choose a version of cargo to run, because one wasn't specified explicitly, and no default is configured." >&2
echo "help: run 'rustup default stable' to download the latest stable release of Rust and set it as your default toolchain." >&2
exit 1
EOF
printf '#!/bin/sh\necho "cargo 1.65.0"\n' > "$fake/good/cargo"
chmod +x "$fake/rustup/cargo" "$fake/good/cargo"
failures=0
# "ok PATH" naming Debian's cargo: /usr/bin/cargo, or /bin/cargo where /bin
# is a link to /usr/bin (merged /usr), as PATH found it.
is_debian_cargo() { case "$1" in "ok "*) [ "$(readlink -f "${1#ok }")" = "$(readlink -f /usr/bin/cargo)" ] ;; *) false ;; esac; }
fail() { echo "toolchain check: $*"; failures=$((failures + 1)); }
# check PATH SCRIPT: runs SCRIPT with toolchains.sh sourced under PATH
check() { PATH="$1" bash -c "source '$root/scripts/toolchains.sh'; $2"; }

# 1. The broken proxy first, a working cargo after it: the working one wins.
got="$(check "$fake/rustup:$fake/good:/usr/bin:/bin" 'toolchain cargo "{} --version" cargo && echo "$TOOL"')"
[ "$got" = "$fake/good/cargo" ] || fail "with a broken cargo first, chose '$got', not $fake/good/cargo"

# 2. Only the broken proxy (and whatever /usr/bin has), not root: the
#    verdict names the failure and the exact command, or finds Debian's.
got="$(APPNORTH_NO_APT=1 check "$fake/rustup:/usr/bin:/bin" \
       'if toolchain cargo "{} --version" cargo; then echo "ok $TOOL"; else echo "no $TOOL_WHY"; fi')"
if [ -x /usr/bin/cargo ] && /usr/bin/cargo --version >/dev/null 2>&1; then
    is_debian_cargo "$got" || fail "with Debian's cargo installed, got: $got"
else
    case "$got" in
        "no $fake/rustup/cargo fails (cargo --version: error: rustup could not choose a version of cargo to run"*"run: sudo apt-get install -y cargo"*) ;;
        *) fail "the broken proxy alone gave: $got" ;;
    esac
fi

# 3. As root with apt-get: Debian's package is installed (a fake apt-get
#    here, which puts a working cargo on PATH) and then used.
printf '#!/bin/sh\necho 0\n' > "$fake/apt/id"
cat > "$fake/apt/apt-get" <<EOF
#!/bin/sh
echo "\$*" >> "$fake/apt-get.log"
case "\$*" in *"install -y -q cargo"*) cp "$fake/good/cargo" "$fake/installed/cargo" ;; esac
EOF
chmod +x "$fake/apt/id" "$fake/apt/apt-get"
got="$(check "$fake/rustup:$fake/apt:$fake/installed:/bin" \
       'if toolchain cargo "{} --version" cargo 2>/dev/null; then echo "ok $TOOL"; else echo "no $TOOL_WHY"; fi')"
if [ -x /usr/bin/cargo ] && /usr/bin/cargo --version >/dev/null 2>&1; then
    is_debian_cargo "$got" || fail "as root with Debian's cargo present, got: $got"
else
    [ "$got" = "ok $fake/installed/cargo" ] || fail "as root, the installed cargo was not used: $got"
    grep -q "install -y -q cargo" "$fake/apt-get.log" || fail "as root, apt-get was not asked for cargo"
fi

# 4. A tool that is not there at all: the exact package to install.
got="$(APPNORTH_NO_APT=1 check "$fake/rustup:/bin" \
       'toolchain no-such-tool "{} --version" no-such-package || echo "$TOOL_WHY"')"
[ "$got" = "no no-such-tool on PATH; run: sudo apt-get install -y no-such-package" ] || fail "a missing tool gave: $got"

[ "$failures" = 0 ] || exit 1
echo "toolchain check: a broken rustup cargo first on PATH is passed over, reported with the command to run, or replaced by Debian's as root"
