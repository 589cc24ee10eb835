#!/usr/bin/env bash
# Builds the Node-API addon (bindings/node/src) against DIST's header and
# library and packs the two npm packages into OUT (npm pack, offline):
#   OUT/appnorth-VERSION.tgz                 the JS module and index.d.ts, no binary;
#   OUT/appnorth-linux-x64-gnu-VERSION.tgz   @appnorth/linux-x64-gnu: appnorth.node and
#                                            libappnorth.so.0 beside it ($ORIGIN rpath).
# Both are staged as an install would lay them out: OUT/appnorth and
# OUT/node_modules/@appnorth/linux-x64-gnu, so that require('OUT/appnorth')
# finds its addon (make demo, make bench). The addon is compiled with
# -DNAPI_VERSION from package.json's binary.napi_versions.
# Checks before packing: one version everywhere (the library's, both
# package.json files, the optionalDependencies entry), no install script,
# and what each tarball holds.
# Node-API's headers come from /usr/include/node (Debian's libnode-dev, or
# the nodejs package of the machine's image); the addon links no libnode or
# libuv: their symbols come from the node process that loads it.
# Usage: node-package.sh DIST_DIR OUT_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dist="$(cd "$1" && pwd)"
mkdir -p "$2"
out="$(cd "$2" && pwd)"
src="$root/bindings/node"
node_include="${NODE_INCLUDE:-/usr/include/node}"
[ -r "$node_include/node_api.h" ] || { echo "node-package: no $node_include/node_api.h; run: sudo apt-get install -y libnode-dev" >&2; exit 1; }

target="$(node -p "require('$src/lib/platform').target()")"
[ -f "$src/npm/$target/package.json" ] || { echo "node-package: no platform package for this machine ($target) in bindings/node/npm/" >&2; exit 1; }
version="$(readlink "$dist/lib/libappnorth.so.0" | sed 's/^libappnorth\.so\.//')"
# Prints the Node-API version, or why the two package.json files disagree.
napi="$(node - "$src/package.json" "$src/npm/$target/package.json" "$version" <<'JS'
const [main, plat] = process.argv.slice(2, 4).map((f) => require(f));
const version = process.argv[4];
const problems = [];
if (main.version !== version) problems.push(`appnorth is ${main.version}, the library ${version}`);
if (plat.version !== version) problems.push(`${plat.name} is ${plat.version}, the library ${version}`);
if (main.optionalDependencies?.[plat.name] !== version) problems.push(`optionalDependencies["${plat.name}"] is not "${version}"`);
if (String(main.binary?.napi_versions) !== String(plat.binary?.napi_versions)) problems.push('binary.napi_versions differ');
for (const p of [main, plat]) {
  for (const s of ['preinstall', 'install', 'postinstall']) if (p.scripts?.[s]) problems.push(`${p.name} has an ${s} script`);
}
if (problems.length) { console.error('node-package: ' + problems.join('; ')); process.exit(1); }
console.log(main.binary.napi_versions[0]);
JS
)"

main="$out/appnorth" plat="$out/node_modules/@appnorth/$target"
rm -rf "$main" "$plat" "$out"/appnorth-*.tgz
mkdir -p "$main/lib" "$plat"
# -std=gnu11: uv.h needs POSIX types (pthread_rwlock_t, struct addrinfo).
${CC:-cc} -std=gnu11 -O2 -g -Wall -Wextra -Werror -DNAPI_VERSION="$napi" -fPIC -shared -fvisibility=hidden \
    -I"$node_include" -I"$dist/include" -o "$plat/appnorth.node" "$src"/src/*.c \
    -L"$dist/lib" -lappnorth -Wl,-rpath,'$ORIGIN'
"$root/scripts/check-floor.sh" "$plat/appnorth.node" >/dev/null # the package says glibc >= 2.31
cp -L "$dist/lib/libappnorth.so.0" "$plat/libappnorth.so.0"
cp "$src/npm/$target"/{package.json,README.md} "$plat/"
cp "$src"/{index.js,index.d.ts,package.json,README.md} "$main/"
cp "$src"/lib/*.js "$main/lib/"
for dir in "$main" "$plat"; do
    (cd "$dir" && npm pack --silent --offline --pack-destination "$out" --cache "$out/npm-cache" >/dev/null)
done

main_tgz="$out/appnorth-$version.tgz" plat_tgz="$out/appnorth-$target-$version.tgz"
if tar tzf "$main_tgz" | grep -E '\.node$|\.so(\.|$)|binding\.gyp$'; then
    echo "node-package: $(basename "$main_tgz") holds a binary or a binding.gyp (above)" >&2; exit 1
fi
want="package/README.md package/appnorth.node package/libappnorth.so.0 package/package.json"
have="$(tar tzf "$plat_tgz" | sort | tr '\n' ' ')"
[ "$have" = "$want " ] || { echo "node-package: $(basename "$plat_tgz") holds: $have (want: $want)" >&2; exit 1; }
for tgz in "$main_tgz" "$plat_tgz"; do
    echo "node-package: $tgz ($(du -k "$tgz" | cut -f1) KiB)"
done
