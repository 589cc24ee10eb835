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
#  6. (make test-soak: APPNORTH_SOAK=1) installs the tarballs with the
#     official builds of Node 22, 24 and 26 (scripts/node-builds.sh, about
#     190 MB from PyPI), each with its own npm, and runs the tests and the
#     quickstart with each;
#  7. runs the tests and the quickstart in the Debian roots
#     (scripts/platform-roots.sh): with Debian 13's own Node 20, which links
#     libuv as a shared library, and (test-soak) in Debian 11 (glibc 2.31)
#     with Node 22.
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
mkdir "$work/tmp" # the tests' own folders (os.tmpdir()), gone with the rest
npm_install() { # DIR ARGS...: an offline install into the empty folder DIR
    mkdir -p "$1"
    (cd "$1" && npm install --offline --no-audit --no-fund --silent --cache "$work/npm-cache" "${@:2}")
}
in_dir() { # DIR COMMAND...: COMMAND in DIR, with none of the variables that would point it elsewhere
    (cd "$1" && exec env -u APPNORTH_NODE_ADDON -u LD_LIBRARY_PATH -u NODE_PATH TMPDIR="$work/tmp" "${@:2}")
}
npm_install "$work/app" "${tarballs[@]}"
modules="$work/app/node_modules"
[ -f "$modules/@appnorth/linux-x64-gnu/appnorth.node" ] && [ -f "$modules/@appnorth/linux-x64-gnu/libappnorth.so.0" ] \
    || { echo "test-node: the installed @appnorth/linux-x64-gnu lacks appnorth.node or libappnorth.so.0"; exit 1; }
[ -z "$(find "$modules/appnorth" -name '*.node' -o -name '*.so*')" ] || { echo "test-node: the installed appnorth holds a binary"; exit 1; }
echo "test-node: npm install --offline of $(cd "$out" && echo "${tarballs[@]##*/}") into an empty folder"

tests="$root/bindings/node/test"
APPNORTH_NODE_PACKAGE="$modules/appnorth" in_dir "$work/app" node --test "$tests"/*.test.js

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
quickstart "$(node --version) ($(command -v node))" in_dir "$work/app" node quickstart.js

# appnorth without its platform package: the install succeeds, require() names what is missing.
npm_install "$work/alone" --omit=optional "${tarballs[0]}"
[ ! -e "$work/alone/node_modules/@appnorth" ] || { echo "test-node: --omit=optional installed @appnorth/*"; exit 1; }
if (cd "$work/alone" && env -u APPNORTH_NODE_ADDON node -e "require('appnorth')") > "$work/alone.log" 2>&1 \
    || ! grep -q "npm install @appnorth/linux-x64-gnu@" "$work/alone.log"; then
    cat "$work/alone.log"; echo "test-node: appnorth without @appnorth/linux-x64-gnu did not fail with the loader's error"; exit 1
fi
echo "test-node: appnorth installed alone fails at require() with: $(grep -m1 'could not find' "$work/alone.log")"

# The official builds of the other supported majors, each installing with its own npm.
builds=()
if [ "${APPNORTH_SOAK:-0}" = 1 ]; then
    while IFS= read -r build; do builds+=("$build"); done < <("$root/scripts/node-builds.sh" "$out/builds")
fi
for build in "${builds[@]}"; do
    node_x="$build/bin/node" npm_cli="$build/lib/node_modules/npm/bin/npm-cli.js"
    app="$work/app-$("$node_x" --version)"
    mkdir -p "$app"
    in_dir "$app" "$node_x" "$npm_cli" install --offline --no-audit --no-fund --silent --cache "$work/npm-cache" "${tarballs[@]}"
    cp "$work/app/quickstart.js" "$app/"
    APPNORTH_NODE_PACKAGE="$app/node_modules/appnorth" in_dir "$app" "$node_x" --test "$tests"/*.test.js
    quickstart "$("$node_x" -p "process.version + ', libuv ' + process.versions.uv") (nodejs.org's build; installed with its npm $("$node_x" "$npm_cli" --version))" \
        in_dir "$app" "$node_x" quickstart.js
done

# In the Debian roots (scripts/platform-roots.sh): Debian 13's own Node 20,
# which links libuv as a shared library (its nodejs package installed there
# on first use), and, at the glibc 2.31 floor the platform package declares,
# Debian 11 with the oldest official build above (Debian 11's Node 12 is too
# old). Each runs the tests and the quickstart in a copy of an install above.
roots="$root/scripts/platform-roots.sh"
inside=()
trap 'rm -rf "$work" "${inside[@]}"' EXIT
in_root() { # NAME APP NODE WHERE: NODE ('' for the root's own) runs the tests and the quickstart in NAME's root
    local at dir
    dir="$(mktemp -d "$("$roots" ensure "$1")/tmp/appnorth-node.XXXXXX")"
    inside+=("$dir")
    at="/tmp/${dir##*/}"
    cp -a "$2" "$dir/app"
    cp -a "$tests" "$dir/test"
    mkdir "$dir/tmp"
    local node_in="/usr/bin/node"
    if [ -n "$3" ]; then cp "$3" "$dir/node"; node_in="$at/node"; fi
    run() { env -u APPNORTH_NODE_ADDON -u LD_LIBRARY_PATH -u NODE_PATH TMPDIR="$at/tmp" "$roots" run "$1" "cd $at/app && $2"; }
    run "$1" "APPNORTH_NODE_PACKAGE=$at/app/node_modules/appnorth/ $node_in --test $at/test/*.test.js"
    quickstart "$(run "$1" "$node_in -p \"process.version + ', libuv ' + process.versions.uv + ', glibc ' + process.report.getReport().header.glibcVersionRuntime\"") ($4)" \
        run "$1" "$node_in quickstart.js"
}
"$roots" run debian13 'command -v node >/dev/null || { apt-get update -q >/dev/null &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends nodejs >/dev/null; }'
in_root debian13 "$work/app" "" "Debian 13's /usr/bin/node, in its root"
if [ ${#builds[@]} -gt 0 ]; then
    in_root debian11 "$work/app-$("${builds[0]}/bin/node" --version)" "${builds[0]}/bin/node" "nodejs.org's build, in the Debian 11 root"
fi
