#!/usr/bin/env python3
"""The docs gate (make test): documentation that can go stale is checked
against the tree, so it fails the build instead of misleading a reader.

1. Every folder of Sources/ is named in docs/architecture.md (as `Name/`,
   or a module as `Sources/Name`).
2. Every library thread name (the names given to LibraryThread.spawn,
   BackgroundThread, WorkerPool and appnorth_set_thread_name in Sources/)
   is in docs/architecture.md.
3. docs/architecture.md's table of lock classes is the one the code's
   `LockClass` declarations give (scripts/lock_classes.py, which writes it
   with --write), and the declarations pass that script's checks.
4. Every reference to the tree in docs/ and README.md resolves: relative
   Markdown links; `path` or `path:function` in backticks whose path names
   a source, script or doc file (from the repository root or from any
   folder down: a file must exist with that ending; a function must appear
   in it); `Folder/` in backticks (a folder with that ending); and
   `Type.member` in backticks where Type is a Swift type of Sources/ (the
   member must be declared in Sources/: func, var, let, case, typealias or
   a nested type). README.md's layout and docs/CONVENTIONS.md's list of
   the core's parts name every folder of the core, and only those.
5. Every function of abi/appnorth.symbols is named in CHANGELOG.md.
6. No heading repeats under the same parent heading in docs/, README.md
   or CHANGELOG.md.
7. The facts of scripts/check_doc_facts.py: the library's size as quoted,
   the C layer's files, the state machines' names, the thread names and
   counts the docs quote.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.dont_write_bytecode = True
import check_doc_facts  # noqa: E402
import lock_classes  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
EXTENSIONS = (".swift", ".c", ".h", ".py", ".md", ".sh", ".txt", ".json", ".toml", ".cpp", ".rs", ".lua",
              ".js", ".mjs", ".ts", ".symbols", ".abi", ".supp", ".cmake", ".yml", ".yaml", ".ini", ".cfg", ".gyp")
# Names the docs use as patterns, not as files.
PLACEHOLDERS = {"Type+Concern.swift"}
SKIP_DIRS = {".build", ".git", ".venv", "node_modules", "build", "dist", "__pycache__", ".pytest_cache"}


def repo_files() -> list[str]:
    out = []
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if any(part in SKIP_DIRS for part in rel.parts):
            continue
        out.append(rel.as_posix() + ("/" if path.is_dir() else ""))
    return out


def source_folders() -> list[tuple[str, str]]:
    """(folder path, the name the architecture must show) under Sources/."""
    found = []
    for path in sorted((ROOT / "Sources").rglob("*")):
        if path.is_dir():
            rel = path.relative_to(ROOT / "Sources")
            shown = f"Sources/{rel.as_posix()}" if len(rel.parts) == 1 else f"{path.name}/"
            found.append((f"Sources/{rel.as_posix()}", shown))
    return found


def docs() -> list[Path]:
    return sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]


LINK = re.compile(r"\]\(([^)\s]+)\)")
TICKED = re.compile(r"`([^`\s]+)`")


def looks_like_file(token: str) -> bool:
    if token.startswith(("/", "~", "$", "http:", "https:", ".", "dist/", "build/")) or token in PLACEHOLDERS:
        return False  # absolute, or made by the build
    if any(c in token for c in "*<>{}|=,;'\"()[]"):
        return False
    path = token.split(":", 1)[0]
    return path.endswith(EXTENSIONS) and ("/" in path or path[:1].isupper() or path.startswith(("test_", "check_")))


def resolves(path: str, files: list[str]) -> str | None:
    if path in files:
        return path
    for f in files:
        if f.endswith("/" + path):
            return f
    return None


def prose_lines(doc: Path) -> str:
    """A document's text with its fenced code blocks blanked (line numbers kept)."""
    return re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), doc.read_text(encoding="utf-8"),
                  flags=re.S | re.M)


def check_references(files: list[str]) -> list[str]:
    problems = []
    for doc in docs():
        text = prose_lines(doc)
        rel_doc = doc.relative_to(ROOT).as_posix()
        for number, line in enumerate(text.splitlines(), 1):
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                    continue
                target = target.split("#", 1)[0]
                if not (doc.parent / target).resolve().exists():
                    problems.append(f"{rel_doc}:{number}: link to {target} does not resolve")
            for token in TICKED.findall(line):
                if not looks_like_file(token):
                    continue
                path, _, function = token.partition(":")
                found = resolves(path, files)
                if found is None:
                    problems.append(f"{rel_doc}:{number}: `{token}`: no file {path}")
                elif function and re.fullmatch(r"[A-Za-z_]\w*", function):
                    if not re.search(rf"\b{re.escape(function)}\b", (ROOT / found).read_text(encoding="utf-8")):
                        problems.append(f"{rel_doc}:{number}: `{token}`: no {function} in {found}")
    return problems


SWIFT_TYPE = re.compile(r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|private|fileprivate|final|open|"
                        r"indirect)\s+)*(?:class|struct|enum|actor|protocol|extension)\s+([A-Za-z_]\w*)", re.M)
MEMBER = re.compile(r"\b(?:func|var|let|case|typealias|class|struct|enum|actor|protocol)\s+`?([A-Za-z_]\w*)")


def swift_members() -> dict[str, set[str]]:
    """For each Swift type of Sources/, the names declared in the files
    that declare or extend it (func, var, let, case, typealias, nested
    types, init)."""
    members: dict[str, set[str]] = {}
    declared: set[str] = set()
    for path in (ROOT / "Sources").rglob("*.swift"):
        text = path.read_text(encoding="utf-8")
        names = set(MEMBER.findall(text))
        # enum cases listed on one line: `case a, b, c`
        for line in re.findall(r"^\s*(?:indirect\s+)?case\s+([^:=(\n]+)$", text, re.M):
            names.update(name.strip() for name in line.split(",") if re.fullmatch(r"\s*\w+\s*", name))
        if "init(" in text:
            names.add("init")
        for type_name in SWIFT_TYPE.findall(text):
            members.setdefault(type_name, set()).update(names)
        declared.update(re.findall(r"\b(?:class|struct|enum|actor|protocol)\s+([A-Za-z_]\w*)", text))
    # A type only extended here (Foundation's, the standard library's) is not checked.
    return {name: names for name, names in members.items() if name in declared}


def ticked_tokens() -> Iterator[tuple[Path, int, str]]:
    """Every `backticked` token of the docs' prose: (document, line number, token)."""
    for doc in docs():
        for number, line in enumerate(prose_lines(doc).splitlines(), 1):
            for token in TICKED.findall(line):
                yield doc, number, token


def check_symbols() -> list[str]:
    members = swift_members()
    problems = []
    for doc, number, token in ticked_tokens():
        m = re.fullmatch(r"([A-Z]\w*)\.([A-Za-z_]\w*)(?:\(.*\))?", token)
        if (m and m.group(1) in members and m.group(2) not in members[m.group(1)]
                and "." + m.group(2) not in EXTENSIONS):
            problems.append(f"{doc.relative_to(ROOT)}:{number}: `{token}`: {m.group(2)} is not declared "
                            f"with {m.group(1)} in Sources/")
    return problems


def check_folder_refs(files: list[str]) -> list[str]:
    problems = []
    for doc, number, token in ticked_tokens():
        if re.fullmatch(r"[A-Z][A-Za-z0-9]*(?:/[A-Za-z][\w.-]*)*/", token) and resolves(token, files) is None:
            problems.append(f"{doc.relative_to(ROOT)}:{number}: `{token}`: no such folder")
    return problems


def check_readme_layout() -> list[str]:
    core = {p.name for p in (ROOT / "Sources" / "AppNorthCore").iterdir() if p.is_dir()}
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("Sources/AppNorthCore/") and ":" in line:
            named = {n.strip().rstrip("/") for n in line.split(":", 1)[1].split(",")}
            named = {n.split()[-1] if n.split() else n for n in named}
            problems = [f"README.md: the layout names {n}, not a folder of Sources/AppNorthCore" for n in sorted(named - core)]
            problems += [f"README.md: the layout does not name the core folder {n}/" for n in sorted(core - named)]
            return problems
    return ["README.md: no layout line for Sources/AppNorthCore/"]


def check_conventions_layout() -> list[str]:
    """docs/CONVENTIONS.md's list of the core's parts names every folder of
    Sources/AppNorthCore, and nothing else."""
    core = {p.name for p in (ROOT / "Sources" / "AppNorthCore").iterdir() if p.is_dir()}
    text = " ".join((ROOT / "docs" / "CONVENTIONS.md").read_text(encoding="utf-8").split())
    m = re.search(r"holds the core's parts \(([^;)]*)", text)
    if not m:
        return ["docs/CONVENTIONS.md: no list of the core's parts (\"holds the core's parts (...)\")"]
    named = {n.strip() for n in m.group(1).split(",")}
    problems = [f"docs/CONVENTIONS.md: the core's parts name {n}, not a folder of Sources/AppNorthCore" for n in sorted(named - core)]
    return problems + [f"docs/CONVENTIONS.md: the core's parts do not name the folder {n}" for n in sorted(core - named)]


def check_headings() -> list[str]:
    problems = []
    for doc in docs() + [ROOT / "CHANGELOG.md"]:
        text = prose_lines(doc)
        stack: list[tuple[int, str]] = []
        seen: dict[tuple, int] = {}
        for number, line in enumerate(text.splitlines(), 1):
            m = re.match(r"^(#{1,6})\s+(.*?)\s*$", line)
            if not m:
                continue
            level = len(m.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            key = (tuple(stack), level, m.group(2))
            if key in seen:
                problems.append(f"{doc.relative_to(ROOT)}:{number}: heading \"{m.group(2)}\" repeats "
                                f"(line {seen[key]}) under the same parent")
            seen.setdefault(key, number)
            stack.append((level, m.group(2)))
    return problems


def check_changelog() -> list[str]:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    problems = []
    for line in (ROOT / "abi" / "appnorth.symbols").read_text(encoding="utf-8").splitlines():
        m = re.search(r"\b(appnorth_\w+)\s*\(", line)
        if line.startswith("#") or not m:
            continue
        if not re.search(rf"\b{m.group(1)}\b", changelog):
            problems.append(f"CHANGELOG.md: {m.group(1)} (abi/appnorth.symbols) is never named")
    return problems


def main() -> int:
    architecture = ARCHITECTURE.read_text(encoding="utf-8")
    problems = []
    for folder, shown in source_folders():
        if shown not in architecture:
            problems.append(f"docs/architecture.md: the folder {folder} is not named (as {shown})")
    for name in sorted(check_doc_facts.thread_names()):
        if name not in architecture:
            problems.append(f"docs/architecture.md: the thread {name} is not named")
    problems += lock_classes.problems(lock_classes.sources())
    files = repo_files()
    problems += check_references(files) + check_folder_refs(files) + check_symbols() + check_readme_layout()
    problems += check_conventions_layout()
    problems += check_changelog() + check_headings()
    problems += check_doc_facts.problems() + [f"check_doc_facts self-test: {f}" for f in check_doc_facts.self_test()]
    for p in problems:
        print(f"docs: {p}")
    if problems:
        return 1
    print("docs: architecture, references, CHANGELOG and headings agree with the tree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
