#!/usr/bin/env bash
# make test-node: the Node.js binding against the dev server
# ($APPNORTH_TEST_SERVER, seeded with --seed-demo).
#  1. builds and packs the addon (scripts/node-package.sh);
#  2. runs its tests with Node's own runner against the staged package;
#  3. installs the tarball into an empty folder, offline, as npm would, and
#     runs the README's "Quickstart: Node" there as written, with
#     APPNORTH_URL pointing at the dev server; the server must then hold
#     the quickstart's event.
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

APPNORTH_NODE_PACKAGE="$out/appnorth" node --test "$root"/bindings/node/test/*.test.js

# index.d.ts, used as an app would (bindings/node/test/types.ts), under tsc --strict.
if [ -n "${TC_tsc:-}" ]; then
    "$TC_tsc" --noEmit --strict --target es2022 --module commonjs --lib es2022,dom "$root/bindings/node/test/types.ts"
    echo "test-node: index.d.ts type-checks under $("$TC_tsc" --version) --strict"
else
    for reason in "${TC_SKIPPED[@]}"; do
        case "$reason" in "Node types: "*) echo "test-node: skipped the index.d.ts check: $reason" ;; esac
    done
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/app"
awk '/^## Quickstart: Node$/ {section = 1; next}
     section && /^```js$/ {inside = 1; next}
     inside && /^```$/ {exit}
     inside {print}' "$root/README.md" > "$work/app/quickstart.js"
[ -s "$work/app/quickstart.js" ] || { echo "test-node: no \`\`\`js block under '## Quickstart: Node' in README.md"; exit 1; }
(cd "$work/app" && npm install --offline --no-audit --no-fund --silent --cache "$work/npm-cache" "$out"/appnorth-*.tgz)
[ -f "$work/app/node_modules/appnorth/appnorth.node" ] && [ -f "$work/app/node_modules/appnorth/libappnorth.so.0" ] \
    || { echo "test-node: the installed package lacks appnorth.node or libappnorth.so.0"; exit 1; }
(cd "$work/app" && env -u APPNORTH_NODE_ADDON -u LD_LIBRARY_PATH -u NODE_PATH APPNORTH_URL="$APPNORTH_TEST_SERVER" \
    node quickstart.js) > "$work/quickstart.log" 2>&1 || { cat "$work/quickstart.log"; echo "test-node: the quickstart failed"; exit 1; }
grep -q "^idea: Dark mode" "$work/quickstart.log" || { cat "$work/quickstart.log"; echo "test-node: the quickstart found no Dark mode idea"; exit 1; }
node -e '
fetch(process.argv[1] + "/admin/apps/demo/state").then((r) => r.json()).then((state) => {
  const n = state.events.filter((e) => e.name === "purchase").length;
  if (n !== 1) { console.error("test-node: the quickstart event arrived " + n + " times"); process.exit(1); }
});' "$APPNORTH_TEST_SERVER"
echo "test-node: npm install of $(basename "$out"/appnorth-*.tgz) into an empty folder (offline) runs the README's Node quickstart"
