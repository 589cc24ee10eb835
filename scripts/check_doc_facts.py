"""Facts the docs quote that a program can check (run by scripts/check-docs.py):

1. The release library's size, as README.md's release tree and
   docs/architecture.md quote it ("7.5 MB"), is the size the last full
   bench measured (bench/results/latest.json, the `size` row), and that of
   dist/'s library when one is built, each to within 0.15 MB.
2. docs/architecture.md's block for Sources/AppNorthC names every Swift
   file of that folder, and every `...API` it names is one of them.
3. The state machines docs/CONVENTIONS.md names are value types (a struct
   or an enum) of Sources/.
4. Every thread name the docs quote (`appnorth-...` in backticks, in docs/
   and README.md) is one the code gives a thread, and the count of the
   library's kinds of threads that docs/architecture.md and
   docs/threading.md state is the number of names in Sources/AppNorthCore.
   (The other way, each name of the code is in docs/architecture.md, is
   scripts/check-docs.py's.)
Each check returns a list of problems (empty: the docs agree).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOLERANCE_MB = 0.15


def quoted_sizes() -> list[tuple[str, float]]:
    """(where, MB) of every place that quotes the release library's size."""
    found = []
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for m in re.finditer(r"libappnorth\.so\.[\d.]+\s+\((\d+(?:\.\d+)?) MB stripped", readme):
        found.append(("README.md (release tree)", float(m.group(1))))
    architecture = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for m in re.finditer(r"static release library is\s+about (\d+(?:\.\d+)?) MB", architecture):
        found.append(("docs/architecture.md (Decisions)", float(m.group(1))))
    return found


def measured_sizes() -> list[tuple[str, float]]:
    sizes = []
    latest = ROOT / "bench" / "results" / "latest.json"
    if latest.is_file():
        size = json.loads(latest.read_text(encoding="utf-8")).get("raw", {}).get("size")
        if size:
            sizes.append(("bench/results/latest.json", size["bytes"] / 1e6))
    for lib in sorted((ROOT / "dist" / "lib").glob("libappnorth.so.*.*.*")):
        if lib.is_file() and not lib.is_symlink():
            sizes.append((f"dist/lib/{lib.name}", lib.stat().st_size / 1e6))
    return sizes


def check_sizes() -> list[str]:
    quoted = quoted_sizes()
    problems = [] if len(quoted) >= 2 else ["README.md or docs/architecture.md no longer quotes the library's size "
                                             "in the form this check reads (scripts/check_doc_facts.py)"]
    for where, mb in quoted:
        for source, actual in measured_sizes():
            if abs(mb - actual) > TOLERANCE_MB:
                problems.append(f"{where} quotes {mb} MB for the release library; {source} has {actual:.2f} MB")
    return problems


def c_layer_block() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = text.find("Sources/AppNorthC ")
    end = text.find("Sources/AppNorthCore ", start)
    return text[start:end] if start >= 0 and end > start else ""


def check_c_layer_files() -> list[str]:
    block = c_layer_block()
    if not block:
        return ["docs/architecture.md: no block for Sources/AppNorthC before Sources/AppNorthCore"]
    stems = {p.stem for p in (ROOT / "Sources" / "AppNorthC").glob("*.swift")}
    named = set(re.findall(r"\b([A-Z][A-Za-z]+)\b", block))
    problems = [f"docs/architecture.md: Sources/AppNorthC/{s}.swift is not named in the C layer's block"
                for s in sorted(stems - named)]
    problems += [f"docs/architecture.md: the C layer's block names {n}, which is no file of Sources/AppNorthC"
                 for n in sorted(n for n in named if n.endswith("API") and n not in stems)]
    return problems


def value_types() -> set[str]:
    names = set()
    for path in (ROOT / "Sources").rglob("*.swift"):
        names.update(re.findall(r"^\s*(?:(?:public|package|internal|private|fileprivate)\s+)?(?:struct|enum)\s+(\w+)",
                                path.read_text(encoding="utf-8"), re.M))
    return names


def check_state_machines() -> list[str]:
    text = " ".join((ROOT / "docs" / "CONVENTIONS.md").read_text(encoding="utf-8").split())
    m = re.search(r"The library's: (.*?)\.(?: |$)", text)
    if not m:
        return ["docs/CONVENTIONS.md: no list of the library's state machines (\"The library's: ...\")"]
    types = value_types()
    return [f"docs/CONVENTIONS.md: the state machine {n} is no struct or enum of Sources/"
            for n in re.findall(r"`(\w+)`", m.group(1)) if n not in types]


THREAD_NAME = re.compile(r'(?:BackgroundThread\(name:|threadName:|appnorth_set_thread_name\(|LibraryThread\.spawn\()\s*"([^"]+)"')
COUNTS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}


def thread_names(base: str = "Sources") -> set[str]:
    """The names the code gives its threads, under `base`."""
    names = set()
    for path in (ROOT / base).rglob("*.swift"):
        names.update(THREAD_NAME.findall(path.read_text(encoding="utf-8")))
    return names


def quoted_threads() -> list[tuple[str, str]]:
    """(where, name) of every `appnorth-...` in backticks in docs/ and README.md."""
    found = []
    for doc in sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for name in re.findall(r"`(appnorth-[a-z0-9-]+)`", line):
                found.append((f"{doc.relative_to(ROOT)}:{number}", name))
    return found


def quoted_thread_counts() -> list[tuple[str, str]]:
    """(where, count word) of the sentences that count the library's threads."""
    found = []
    for rel, pattern in (("docs/architecture.md", r"\b(\w+) kinds of library threads"),
                         ("docs/threading.md", r"\b(\w+) kinds of background threads")):
        text = " ".join((ROOT / rel).read_text(encoding="utf-8").split())
        found += [(rel, m.group(1).lower()) for m in re.finditer(pattern, text)]
    return found


def check_threads() -> list[str]:
    names = thread_names()
    problems = [f"{where}: `{name}` is no thread name of Sources/ (those are: {', '.join(sorted(names))})"
                for where, name in quoted_threads() if name not in names]
    library = len(thread_names("Sources/AppNorthCore"))
    counts = quoted_thread_counts()
    if len(counts) < 2:
        problems.append("docs/architecture.md (\"N kinds of library threads\") or docs/threading.md (\"N kinds of "
                        "background threads\") no longer counts the threads in the form this check reads")
    problems += [f"{where}: says {word} kinds of threads; Sources/AppNorthCore names {library}"
                 for where, word in counts if COUNTS.get(word) != library]
    return problems


def problems() -> list[str]:
    return check_sizes() + check_c_layer_files() + check_state_machines() + check_threads()


def self_test() -> list[str]:
    """The checks see what they must: a wrong size, an unnamed file, a
    state machine that is no type."""
    failures = []
    if not any(abs(9.9 - actual) > TOLERANCE_MB for _, actual in measured_sizes()):
        failures.append("no measured size to compare with")
    if "Handle" not in set(re.findall(r"\b([A-Z][A-Za-z]+)\b", c_layer_block())):
        failures.append("the C layer's block was not read")
    if "UploadTrigger" not in value_types() or "NoSuchMachine" in value_types():
        failures.append("the value types were not read")
    if "appnorth-xfer" not in thread_names("Sources/AppNorthCore") or "appnorth-worker" in thread_names("Sources/AppNorthCore"):
        failures.append("the library's thread names were not read")
    if not any(name == "appnorth-xfer" for _, name in quoted_threads()) or len(quoted_thread_counts()) < 2:
        failures.append("the docs' thread names and counts were not read")
    return failures
