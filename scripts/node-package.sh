#!/usr/bin/env bash
# Builds the Node-API addon (bindings/node/src) against DIST's header and
# library, stages the npm package in OUT/appnorth (the JS module, index.d.ts,
# appnorth.node and libappnorth.so.0 beside it, found through the addon's
# $ORIGIN rpath) and packs it: OUT/appnorth-VERSION.tgz (npm pack, offline).
# Node-API's headers come from /usr/include/node (Debian's libnode-dev, or
# the nodejs package of the machine's image); the addon links no libnode or
# libuv: their symbols come from the node process that loads it.
# Usage: node-package.sh DIST_DIR OUT_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dist="$(cd "$1" && pwd)"
mkdir -p "$2"
out="$(cd "$2" && pwd)"
stage="$out/appnorth"
node_include="${NODE_INCLUDE:-/usr/include/node}"
[ -r "$node_include/node_api.h" ] || { echo "node-package: no $node_include/node_api.h; run: sudo apt-get install -y libnode-dev" >&2; exit 1; }

rm -rf "$stage"
mkdir -p "$stage/lib"
# -std=gnu11: uv.h needs POSIX types (pthread_rwlock_t, struct addrinfo).
${CC:-cc} -std=gnu11 -O2 -g -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden \
    -I"$node_include" -I"$dist/include" -o "$stage/appnorth.node" "$root"/bindings/node/src/*.c \
    -L"$dist/lib" -lappnorth -Wl,-rpath,'$ORIGIN'
cp -L "$dist/lib/libappnorth.so.0" "$stage/libappnorth.so.0"
cp "$root"/bindings/node/{index.js,index.d.ts,package.json,README.md} "$stage/"
cp "$root"/bindings/node/lib/*.js "$stage/lib/"
rm -f "$out"/appnorth-*.tgz
(cd "$stage" && npm pack --silent --offline --pack-destination "$out" --cache "$out/npm-cache" >/dev/null)
ls "$out"/appnorth-*.tgz >/dev/null
echo "node-package: $(ls "$out"/appnorth-*.tgz) ($(du -k "$out"/appnorth-*.tgz | cut -f1) KiB)"
