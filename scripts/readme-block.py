#!/usr/bin/env python3
"""Prints the first fenced block of a language under a README heading, so
that tests run the README's code as written.
Usage: readme-block.py README.md "Quickstart: C" c"""
import re
import sys

path, heading, lang = sys.argv[1:4]
text = open(path, encoding="utf-8").read()
section = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
block = section and re.search(rf"^```{re.escape(lang)}\n(.*?)^```$", section.group(1), re.S | re.M)
if not block:
    sys.exit(f"readme-block: no ```{lang} block under '## {heading}' in {path}")
sys.stdout.write(block.group(1))
