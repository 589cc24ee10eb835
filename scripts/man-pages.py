#!/usr/bin/env python3
"""The man pages of libappnorth, from include/appnorth.h (standard library only).

One page per function of the header, appnorth_NAME(3), and an overview,
appnorth(3). The header stays the one source: a page's DESCRIPTION is the
function's doc comment, its RETURN VALUE the comment's sentences that begin
with "Returns", its SEE ALSO the other functions of its header section, its
HISTORY the release that added it (abi/appnorth.symbols).

    scripts/man-pages.py OUTDIR          write OUTDIR/*.3
    scripts/man-pages.py --test          write to a scratch folder, then check
        that every function of abi/appnorth.symbols has a page and that
        `mandoc -T lint` and `groff -ww -man -z` render each with no warning
"""
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADER = ROOT / "include" / "appnorth.h"
SYMBOLS = ROOT / "abi" / "appnorth.symbols"
MANUAL = "libappnorth Manual"


def page_date():
    """The header's last commit date, so that a rebuild gives the same pages
    (SOURCE_DATE_EPOCH wins, as reproducible builds expect)."""
    if os.environ.get("SOURCE_DATE_EPOCH", "").isdigit():
        return time.strftime("%Y-%m-%d", time.gmtime(int(os.environ["SOURCE_DATE_EPOCH"])))
    git = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%cs", "--", "include/appnorth.h"],
                         capture_output=True, text=True)
    return git.stdout.strip() if git.returncode == 0 and git.stdout.strip() else time.strftime("%Y-%m-%d")


def comment_lines(text):
    """The lines of a /* */ comment without the stars; indentation kept."""
    body = re.sub(r"^/\*+|\*+/$", "", text.strip())
    return [re.sub(r"^\s*\*(?!/) ?", "", line).rstrip() for line in body.splitlines()]


def parse(header):
    """(overview lines, [(section title, [(name, prototype, doc lines)])])."""
    token = re.compile(r"(?P<comment>/\*.*?\*/)|(?P<api>^APPNORTH_API\b[^;]*;)|(?P<other>^[^\s/][^\n]*)", re.S | re.M)
    overview, sections, doc = None, [], []
    for match in token.finditer(header):
        kind, text = match.lastgroup, match.group(match.lastgroup)
        if kind == "comment":
            lines = comment_lines(text)
            if overview is None:
                overview = lines
            elif re.match(r"/\*\s*-{8,}", text):
                title = next(line.strip() for line in lines if line.strip() and not re.fullmatch(r"[-\s]*", line))
                sections.append((title, []))
                doc = []
            else:
                doc = lines if text.startswith("/**") else []
        elif kind == "api":
            decl = " ".join(re.sub(r"APPNORTH_API|APPNORTH_DEPRECATED\s*\([^)]*\)", " ", text.rstrip(";")).split())
            decl = decl.replace("( ", "(").replace(" )", ")")
            name = re.search(r"(\w+)\(", decl).group(1)
            if not doc:
                sys.exit(f"man-pages: {name} has no doc comment (/** ... */) right above it in the header")
            if re.fullmatch(r"\s*Returns at once\b[^.]*\.\s*", " ".join(doc)) and sections[-1][1]:
                doc = sections[-1][1][-1][2]  # declared with the one before, whose comment says it all
            sections[-1][1].append((name, decl, doc))
            doc = []
        else:
            doc = []
    return overview, [(title, functions) for title, functions in sections if functions]


def escape(text):
    text = text.replace("\\", "\\e")
    text = re.sub(r"\b(appnorth_\w+)\(\)", r"\\fB\1\\fR()", text)
    text = re.sub(r"`([^`]+)`", r"\\fI\1\\fR", text)
    return "\\&" + text if text.startswith((".", "'")) else text


def roff_body(lines):
    """Comment lines to man(7): paragraphs, bullet lists, literal blocks."""
    out, mode = [], "text"
    for line in lines:
        stripped = line.strip()
        bullet = re.match(r"\s*- (.*)", line)
        if not stripped:
            if mode == "literal":
                out.append(".fi")
            mode = "gap"
        elif bullet:
            if mode == "literal":
                out.append(".fi")
            out += [".IP \\(bu 2", escape(bullet.group(1))]
            mode = "bullet"
        elif mode == "bullet" and line.startswith("  "):
            out.append(escape(stripped))
        elif line.startswith("  "):
            if mode != "literal":
                out += [".PP", ".nf"]
            out.append(escape(line.rstrip()))
            mode = "literal"
        else:
            if mode != "text":
                out.append(".fi" if mode == "literal" else ".PP")
            out.append(escape(stripped))
            mode = "text"
    if mode == "literal":
        out.append(".fi")
    while out and out[0] == ".PP":
        out.pop(0)
    return out


def split_returns(lines):
    """(description lines, return sentences): sentences beginning with
    "Returns" (a value, not "Returns at once") leave the description for
    RETURN VALUE."""
    text = "\n".join(lines)
    sentences = re.split(r"(?<=\.)(?=\s+(?:[A-Z]|$))", text)
    returns = [s for s in sentences if re.match(r"\s*Returns\b(?! at once)", s)]
    if not returns:
        return lines, []
    rest = "".join(s for s in sentences if s not in returns)
    flat = [" ".join(s.split()) for s in returns]
    return [line.rstrip() for line in rest.split("\n") if not re.fullmatch(r"\s+", line)], flat


def synopsis(prototype):
    head, params = prototype.split("(", 1)
    params = params.rstrip(")").split(", ")
    indent = " " * (len(head) + 1)
    body = (",\n" + indent).join(params)
    return [".nf", "\\fB#include <appnorth.h>\\fR", "", escape(f"{head}({body});"), ".fi",
            ".PP", "Link with \\fI\\-lappnorth\\fR (\\fBpkg\\-config \\-\\-libs appnorth\\fR)."]


def function_page(name, prototype, doc, since, family, version):
    description, returns = split_returns(doc)
    first = " ".join(" ".join(description).split())
    summary = re.split(r"(?<=\.)\s", first)[0].rstrip(".:") if first else name
    if len(summary) > 70:  # NAME is one line for whatis(1): up to the first clause's end
        cuts = [summary.find(mark, 16) for mark in (": ", " (", "; ", ", ")]
        summary = summary[:min([cut for cut in cuts if cut > 0], default=len(summary))]
    if re.match(r"[A-Z][a-z]", summary):
        summary = summary[0].lower() + summary[1:]
    node = "APPNORTH_" + ".".join(since.split(".")[:2])
    out = [f'.TH {name.upper()} 3 {DATE} "libappnorth {version}" "{MANUAL}"', ".nh", ".ad l", ".SH NAME",
           f"{name} \\- {escape(summary)}", ".SH SYNOPSIS", *synopsis(prototype),
           ".SH DESCRIPTION", *roff_body(description)]
    if returns:
        out += [".SH RETURN VALUE", *(escape(s) for s in returns)]
    out += [".SH HISTORY", f"Added in libappnorth {since}, symbol version {node}."]
    others = [f".BR {other} (3)," for other in family if other != name]
    out += [".SH SEE ALSO", *others, ".BR appnorth (3)"]
    return "\n".join(out) + "\n"


def overview_page(overview, sections, version):
    out = [f'.TH APPNORTH 3 {DATE} "libappnorth {version}" "{MANUAL}"', ".nh", ".ad l", ".SH NAME",
           "appnorth \\- offline\\-first client SDK core, the C interface", ".SH SYNOPSIS",
           ".nf", "\\fB#include <appnorth.h>\\fR", ".fi", ".PP",
           "Link with \\fI\\-lappnorth\\fR (\\fBpkg\\-config \\-\\-libs appnorth\\fR).",
           ".SH DESCRIPTION", *roff_body(overview[2:]), ".SH FUNCTIONS"]
    for title, functions in sections:
        out += [".SS " + escape(title), *(f".BR {name} (3)" + ("," if i < len(functions) - 1 else "")
                                          for i, (name, _, _) in enumerate(functions))]
    out += [".SH SEE ALSO", "The header, \\fIappnorth.h\\fR, is the source of these pages."]
    return "\n".join(out) + "\n"


def listed_versions():
    lines = [line for line in SYMBOLS.read_text().splitlines() if line.strip() and not line.startswith("#")]
    return {re.search(r"(appnorth_\w+)\(", line).group(1): line.split()[0] for line in lines}


def write_pages(outdir):
    header = HEADER.read_text()
    version = re.search(r'#define APPNORTH_VERSION_STRING "([^"]+)"', header).group(1)
    overview, sections = parse(header)
    since = listed_versions()
    outdir.mkdir(parents=True, exist_ok=True)
    for old in outdir.glob("*.3"):
        old.unlink()
    (outdir / "appnorth.3").write_text(overview_page(overview, sections, version))
    for _, functions in sections:
        family = [name for name, _, _ in functions]
        for name, prototype, doc in functions:
            if name not in since:
                sys.exit(f"man-pages: {name} is not in abi/appnorth.symbols (make test-hosts says what to add)")
            (outdir / f"{name}.3").write_text(function_page(name, prototype, doc, since[name], family, version))
    return sorted(outdir.glob("*.3"))


def lint(pages):
    problems = []
    for page in pages:
        mandoc = subprocess.run(["mandoc", "-T", "lint", "-W", "warning", str(page)], capture_output=True, text=True)
        groff = subprocess.run(["groff", "-ww", "-man", "-z", str(page)], capture_output=True, text=True)
        for tool, result in (("mandoc -T lint", mandoc), ("groff -ww -man", groff)):
            if result.returncode != 0 or result.stdout.strip() or result.stderr.strip():
                problems.append(f"{tool} {page.name}:\n{result.stdout}{result.stderr}".rstrip())
    return problems


def test():
    with tempfile.TemporaryDirectory() as scratch:
        pages = write_pages(Path(scratch))
        missing = sorted(f"{name}.3" for name in listed_versions()) + ["appnorth.3"]
        missing = [page for page in missing if not (Path(scratch) / page).is_file()]
        problems = [f"no page for {page[:-2]} (abi/appnorth.symbols)" for page in missing] + lint(pages)
        empty = [p for p in pages if re.search(r"^\.SH DESCRIPTION\n\.SH", p.read_text(), flags=re.M)]
        problems += [f"{p.name}: an empty DESCRIPTION" for p in empty]
    if problems:
        print("man pages:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(f"man pages: {len(pages)} pages ({len(pages) - 1} functions of abi/appnorth.symbols and appnorth(3)) "
          "render with no warning under mandoc -T lint and groff -ww")
    return 0


DATE = page_date()

if __name__ == "__main__":
    if sys.argv[1:] == ["--test"]:
        sys.exit(test())
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(f"man pages: {len(write_pages(Path(sys.argv[1])))} in {sys.argv[1]}")
