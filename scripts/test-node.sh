#!/usr/bin/env bash
# make test-node: the Node.js binding against the dev server
# ($APPNORTH_TEST_SERVER, seeded with --seed-demo).
#  1. builds the addon and packs the two npm packages (scripts/node-package.sh):
#     appnorth (JS only) and @appnorth/linux-x64-gnu (the addon, libappnorth.so.0);
#  2. installs both tarballs into an empty folder, offline, as npm would
#     (the npm registry is never asked), and checks where each file went;
#  3. runs the binding's tests with Node's own runner against that install;
#  4. runs the README's "Quickstart: Node" there as written, with
#     APPNORTH_URL pointing at the dev server; the server must then hold
#     the quickstart's event;
#  5. installs appnorth alone (optional dependencies omitted): require()
#     fails with the loader's error, which names the platform package;
#  6. runs the tests and the quickstart again in the Debian 13 root with
#     Debian's own Node (scripts/platform-roots.sh; its nodejs package is
#     installed there on first use; it links libuv as a shared library).
# Without a working node (scripts/toolchains.sh; as root Debian's nodejs and
# libnode-dev are installed) it says what to install and skips.
# Usage: test-node.sh BUILD_DIR DIST_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$1/node"
out="$(cd "$1/node" && pwd)"
# shellcheck source=scripts/toolchains.sh
source "$root/scripts/toolchains.sh"
host_toolchains
for reason in "${TC_SKIPPED[@]}"; do
    case "$reason" in "Node: "*) echo "test-node: skipped: $reason"; exit 0 ;; esac
done
PATH="$(dirname "$TC_node"):$PATH"
"$root/scripts/node-package.sh" "$2" "$out"
tarballs=("$out"/appnorth-[0-9]*.tgz "$out"/appnorth-linux-x64-gnu-[0-9]*.tgz)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
npm_install() { # DIR ARGS...: an offline install into the empty folder DIR
    mkdir -p "$1"
    (cd "$1" && npm install --offline --no-audit --no-fund --silent --cache "$work/npm-cache" "${@:2}")
}
npm_install "$work/app" "${tarballs[@]}"
modules="$work/app/node_modules"
[ -f "$modules/@appnorth/linux-x64-gnu/appnorth.node" ] && [ -f "$modules/@appnorth/linux-x64-gnu/libappnorth.so.0" ] \
    || { echo "test-node: the installed @appnorth/linux-x64-gnu lacks appnorth.node or libappnorth.so.0"; exit 1; }
[ -z "$(find "$modules/appnorth" -name '*.node' -o -name '*.so*')" ] || { echo "test-node: the installed appnorth holds a binary"; exit 1; }
echo "test-node: npm install --offline of $(cd "$out" && echo "${tarballs[@]##*/}") into an empty folder"

tests="$root/bindings/node/test"
env -u APPNORTH_NODE_ADDON -u NODE_PATH APPNORTH_NODE_PACKAGE="$modules/appnorth" node --test "$tests"/*.test.js

# index.d.ts, used as an app would (bindings/node/test/types.ts), under tsc --strict.
if [ -n "${TC_tsc:-}" ]; then
    "$TC_tsc" --noEmit --strict --target es2022 --module commonjs --lib es2022,dom "$root/bindings/node/test/types.ts"
    echo "test-node: index.d.ts type-checks under $("$TC_tsc" --version) --strict"
else
    for reason in "${TC_SKIPPED[@]}"; do
        case "$reason" in "Node types: "*) echo "test-node: skipped the index.d.ts check: $reason" ;; esac
    done
fi

awk '/^## Quickstart: Node$/ {section = 1; next}
     section && /^```js$/ {inside = 1; next}
     inside && /^```$/ {exit}
     inside {print}' "$root/README.md" > "$work/app/quickstart.js"
[ -s "$work/app/quickstart.js" ] || { echo "test-node: no \`\`\`js block under '## Quickstart: Node' in README.md"; exit 1; }
purchases() {
    node -e 'fetch(process.argv[1] + "/admin/apps/demo/state").then((r) => r.json())
      .then((s) => console.log(s.events.filter((e) => e.name === "purchase").length));' "$APPNORTH_TEST_SERVER"
}
quickstart() { # WHERE COMMAND...: runs the quickstart; it must print the idea and send one event
    local where="$1" before
    shift
    before="$(purchases)"
    "$@" > "$work/quickstart.log" 2>&1 || { cat "$work/quickstart.log"; echo "test-node: the quickstart failed ($where)"; exit 1; }
    grep -q "^idea: Dark mode" "$work/quickstart.log" || { cat "$work/quickstart.log"; echo "test-node: the quickstart found no Dark mode idea ($where)"; exit 1; }
    [ "$(purchases)" = $((before + 1)) ] || { echo "test-node: the quickstart event did not arrive once ($where)"; exit 1; }
    echo "test-node: the README's Node quickstart runs with $where"
}
export APPNORTH_URL="$APPNORTH_TEST_SERVER"
quickstart "$(node --version) ($(command -v node))" sh -c 'cd "$1" && exec env -u APPNORTH_NODE_ADDON -u LD_LIBRARY_PATH -u NODE_PATH node quickstart.js' sh "$work/app"

# appnorth without its platform package: the install succeeds, require() names what is missing.
npm_install "$work/alone" --omit=optional "${tarballs[0]}"
[ ! -e "$work/alone/node_modules/@appnorth" ] || { echo "test-node: --omit=optional installed @appnorth/*"; exit 1; }
if (cd "$work/alone" && env -u APPNORTH_NODE_ADDON node -e "require('appnorth')") > "$work/alone.log" 2>&1 \
    || ! grep -q "npm install @appnorth/linux-x64-gnu@" "$work/alone.log"; then
    cat "$work/alone.log"; echo "test-node: appnorth without @appnorth/linux-x64-gnu did not fail with the loader's error"; exit 1
fi
echo "test-node: appnorth installed alone fails at require() with: $(grep -m1 'could not find' "$work/alone.log")"

# The same install, tests and quickstart with Debian 13's own Node, in its root.
roots="$root/scripts/platform-roots.sh"
root13="$("$roots" ensure debian13)"
"$roots" run debian13 'command -v node >/dev/null || { apt-get update -q >/dev/null &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends nodejs >/dev/null; }'
inside="$(mktemp -d "$root13/tmp/appnorth-node.XXXXXX")"
trap 'rm -rf "$work" "$inside"' EXIT
cp -a "$work/app" "$inside/app"
cp -a "$tests" "$inside/test"
at="/tmp/${inside##*/}"
in13() { env -u APPNORTH_NODE_ADDON -u LD_LIBRARY_PATH -u NODE_PATH "$roots" run debian13 "cd $at/app && $1"; }
node13="$(in13 "/usr/bin/node -p \"process.version + ', libuv ' + process.versions.uv\"") (Debian 13's /usr/bin/node, linking $(in13 "ldd /usr/bin/node" | grep -o "libuv[^ ]*" | head -1))"
in13 "APPNORTH_NODE_PACKAGE=$at/app/node_modules/appnorth/ /usr/bin/node --test $at/test/*.test.js"
quickstart "$node13" in13 '/usr/bin/node quickstart.js'
