#!/usr/bin/env bash
# The README's C quickstart runs verbatim: it is cut out of README.md, built
# as strict C99 and as C++17 against dist/, and run against the seeded dev
# server ($APPNORTH_TEST_SERVER, DEVSERVER_FLAGS=--seed-demo).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$root/build/quickstart"
mkdir -p "$out"
# The first ```c block after the "## Quickstart: C" heading.
"$root/scripts/readme-block.py" "$root/README.md" "Quickstart: C" c > "$out/quickstart.c"

flags=(-I"$root/dist/include" -L"$root/dist/lib" -lappnorth -Wl,-rpath,"$root/dist/lib")
${CC:-cc} -std=c99 -Wall -Wextra -Werror -pedantic -o "$out/quickstart-c99" "$out/quickstart.c" "${flags[@]}"
${CXX:-c++} -std=c++17 -Wall -Wextra -Werror -pedantic -x c++ -o "$out/quickstart-cxx17" "$out/quickstart.c" -x none "${flags[@]}"

for bin in quickstart-c99 quickstart-cxx17; do
    output=$("$out/$bin" "$APPNORTH_TEST_SERVER") || { echo "quickstart: $bin failed: $output"; exit 1; }
    # The seeded demo app has a "Dark mode" idea; the quickstart searches for it.
    grep -q '"title": *"Dark mode"' <<<"$output" || { echo "quickstart: $bin printed no Dark mode idea: $output"; exit 1; }
done
echo "quickstart: README's C program builds as C99 -pedantic and C++17, and finds the seeded idea"
