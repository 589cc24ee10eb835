#!/usr/bin/env bash
# Symbol versions at work (docs/abi-policy.md, "Symbol versions"): a host
# built against a newer libappnorth, whose function is in a node this
# library does not have (APPNORTH_0.9), is refused by the loader at start,
# before main(), with a message naming the version; even under lazy
# binding. The same host without that call runs. The newer library is a
# scratch stub with the same SONAME.
# Usage: Tests/hosts/version_node.sh DIST
set -euo pipefail
dist="$(cd "$1" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

cat > newer.c <<'EOF'
const char *appnorth_version(void) { return "0.9.0"; }
int appnorth_from_the_future(void) { return 9; }
EOF
cat > newer.map <<'EOF'
APPNORTH_0.2 { global: appnorth_version; local: *; };
APPNORTH_0.9 { global: appnorth_from_the_future; } APPNORTH_0.2;
EOF
mkdir newer
cc -shared -fPIC -Wl,-soname,libappnorth.so.0 -Wl,--version-script=newer.map -o newer/libappnorth.so newer.c

cat > host.c <<'EOF'
#include <stdio.h>
#include <appnorth.h>
int appnorth_from_the_future(void);
int main(void) {
    printf("started, library %s\n", appnorth_version());
#ifdef NEWER
    if (appnorth_from_the_future() != 9) return 1;
#endif
    return 0;
}
EOF
cc -DNEWER -I"$dist/include" -o host-newer host.c -Lnewer -lappnorth
cc -I"$dist/include" -o host-current host.c -L"$dist/lib" -lappnorth
readelf -V host-newer | grep -q 'Name: APPNORTH_0.9' \
    || { echo "version node: host-newer does not record APPNORTH_0.9"; exit 1; }
readelf -V host-current | grep -q 'Name: APPNORTH_0.2' \
    || { echo "version node: host-current does not record APPNORTH_0.2 (is $dist/lib versioned?)"; exit 1; }

out="$(env -u LD_BIND_NOW LD_LIBRARY_PATH="$dist/lib" ./host-current 2>&1)" \
    || { echo "version node: the current host does not run: $out"; exit 1; }
status=0
refused="$(env -u LD_BIND_NOW LD_LIBRARY_PATH="$dist/lib" ./host-newer 2>&1)" || status=$?
if [ "$status" = 0 ] || grep -q started <<<"$refused" \
    || ! grep -Eq "version .APPNORTH_0\.9. not found \(required by \./host-newer\)" <<<"$refused"; then
    echo "version node: the host built against APPNORTH_0.9 was not refused at start by $dist/lib (exit $status):"
    echo "$refused"
    exit 1
fi
echo "version node: a host needing APPNORTH_0.9 is refused at start (exit $status, before main):"
echo "  ${refused//$dist/DIST}"
echo "version node: the same host without that call runs against DIST/lib ($out)"
