#!/usr/bin/env bash
# The symbol floor (docs/platforms.md): no shipped ELF file may need a
# symbol version newer than GLIBC_2.31, GLIBCXX_3.4.28 or CXXABI_1.3.12, so
# that it loads on Debian 11, the Steam Linux Runtime 3, RHEL 9, Amazon
# Linux 2023 and Ubuntu 20.04. Reads what each file needs (the ELF version
# needs, readelf -V), not what it defines.
# Usage: scripts/check-floor.sh FILE... (a .whl is opened and every .so in it checked)
set -euo pipefail
floor_glibc=2.31 floor_glibcxx=3.4.28 floor_cxxabi=1.3.12
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
files=()
for f in "$@"; do
    case "$f" in
        *.whl) mkdir -p "$work/$(basename "$f")"
               python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$f" "$work/$(basename "$f")"
               while IFS= read -r so; do files+=("$so"); done < <(find "$work/$(basename "$f")" -name '*.so*' -type f | sort) ;;
        *) files+=("$f") ;;
    esac
done
[ ${#files[@]} -gt 0 ] || { echo "check-floor: no files to check" >&2; exit 1; }
highest() { # PREFIX FILE: the highest PREFIX_x.y version FILE needs, or "-"
    readelf -V --wide "$2" 2>/dev/null | sed -n '/\.gnu\.version_r/,$p' | grep -oE "Name: $1_[0-9.]+" \
        | sed "s/Name: $1_//" | sort -uV | tail -n 1 | grep . || echo -
}
over() { [ "$1" != - ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -n 1)" != "$2" ]; }
bad=0
for f in "${files[@]}"; do
    g="$(highest GLIBC "$f")" x="$(highest GLIBCXX "$f")" c="$(highest CXXABI "$f")"
    verdict=ok
    if over "$g" $floor_glibc || over "$x" $floor_glibcxx || over "$c" $floor_cxxabi; then verdict=OVER; bad=1; fi
    echo "floor: $(basename "$f") needs GLIBC_$g GLIBCXX_$x CXXABI_$c: $verdict"
done
[ $bad = 0 ] || { echo "check-floor: above the floor (GLIBC_$floor_glibc, GLIBCXX_$floor_glibcxx, CXXABI_$floor_cxxabi): docs/platforms.md" >&2; exit 1; }
