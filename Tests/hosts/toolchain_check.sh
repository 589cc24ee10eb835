#!/usr/bin/env bash
# scripts/toolchains.sh against the broken toolchains a newcomer's machine
# has: a `cargo` first on PATH that is rustup's proxy with no default
# toolchain. Fake tools in a temporary folder stand in for PATH, /usr/bin
# and apt-get; nothing is installed.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
fake="$(mktemp -d)"
trap 'rm -rf "$fake"' EXIT
mkdir -p "$fake/rustup" "$fake/good" "$fake/apt" "$fake/installed" "$fake/none" "$fake/bin"
cat > "$fake/rustup/cargo" <<'SH'
#!/bin/sh
echo "error: rustup could not choose a version of cargo to run, because one wasn't specified explicitly, and no default is configured." >&2
echo "help: run 'rustup default stable' to download the latest stable release of Rust and set it as your default toolchain." >&2
exit 1
SH
printf '#!/bin/sh\necho "cargo 1.65.0"\n' > "$fake/good/cargo"
chmod +x "$fake/rustup/cargo" "$fake/good/cargo"
# The few system tools toolchains.sh and the fake apt-get use, and no cargo.
for tool in sh timeout grep cp id; do ln -s "$(command -v "$tool")" "$fake/bin/$tool"; done
failures=0
fail() { echo "toolchain check: $*"; failures=$((failures + 1)); }
# check PATH SCRIPT: runs SCRIPT with toolchains.sh sourced, PATH as given
# (plus the basic tools) and the fake's empty folder for /usr/bin.
check() { PATH="$1:$fake/bin" APPNORTH_SYSTEM_BIN="${SYSTEM_BIN:-$fake/none}" \
              "$BASH" -c "source '$root/scripts/toolchains.sh'; $2"; }

# 1. The broken proxy first, a working cargo after it: the working one wins.
got="$(check "$fake/rustup:$fake/good" 'toolchain cargo "{} --version" cargo && echo "$TOOL"')"
[ "$got" = "$fake/good/cargo" ] || fail "with a broken cargo first, chose '$got', not $fake/good/cargo"

# 2. The broken proxy on PATH and Debian's cargo in /usr/bin: Debian's wins.
got="$(SYSTEM_BIN="$fake/good" check "$fake/rustup" 'toolchain cargo "{} --version" cargo && echo "$TOOL"')"
[ "$got" = "$fake/good/cargo" ] || fail "with Debian's cargo in /usr/bin, chose '$got'"

# 3. Only the broken proxy, not root: the verdict names the failure and the
#    exact command to run.
got="$(APPNORTH_NO_APT=1 check "$fake/rustup" \
       'if toolchain cargo "{} --version" cargo; then echo "ok $TOOL"; else echo "no $TOOL_WHY"; fi')"
case "$got" in
    "no $fake/rustup/cargo fails (cargo --version: error: rustup could not choose a version of cargo to run"*"run: sudo apt-get install -y cargo") ;;
    *) fail "the broken proxy alone gave: $got" ;;
esac

# 4. As root with apt-get: Debian's package is installed (a fake apt-get
#    here, which puts a working cargo on PATH) and then used.
printf '#!/bin/sh\necho 0\n' > "$fake/apt/id"
cat > "$fake/apt/apt-get" <<SH
#!/bin/sh
echo "\$*" >> "$fake/apt-get.log"
case "\$*" in *"install -y -q cargo"*) cp "$fake/good/cargo" "$fake/installed/cargo" ;; esac
SH
chmod +x "$fake/apt/id" "$fake/apt/apt-get"
got="$(check "$fake/rustup:$fake/apt:$fake/installed" \
       'if toolchain cargo "{} --version" cargo 2>/dev/null; then echo "ok $TOOL"; else echo "no $TOOL_WHY"; fi')"
[ "$got" = "ok $fake/installed/cargo" ] || fail "as root, the installed cargo was not used: $got"
grep -q "install -y -q cargo" "$fake/apt-get.log" 2>/dev/null || fail "as root, apt-get was not asked for cargo"

# 5. A tool that is not there at all: the exact package to install.
got="$(APPNORTH_NO_APT=1 check "$fake/rustup" 'toolchain no-such-tool "{} --version" no-such-package || echo "$TOOL_WHY"')"
[ "$got" = "no no-such-tool on PATH; run: sudo apt-get install -y no-such-package" ] || fail "a missing tool gave: $got"

[ "$failures" = 0 ] || exit 1
echo "toolchain check: a broken rustup cargo first on PATH is passed over for a working one or Debian's," \
     "reported with the command to run, or replaced by Debian's package as root"
