#!/usr/bin/env python3
"""Put one benchmark script's section into docs/benchmarks.md.

Usage: put_section.py DOCS.md SECTION.md

SECTION.md starts with its "## " heading; that heading and everything under it, up to
the next "## " heading, is replaced in DOCS (the section is appended if absent). Other
sections are kept as they are: each benchmark script owns one section.
"""
import sys

docs_path, section_path = sys.argv[1], sys.argv[2]
doc = open(docs_path).read()
section = open(section_path).read().rstrip("\n") + "\n"
title = section.split("\n", 1)[0]
if not title.startswith("## "):
    sys.exit(f"put_section.py: {section_path} does not start with a '## ' heading")
if title in doc:
    start = doc.index(title)
    nxt = doc.find("\n## ", start + len(title))
    doc = doc[:start] + section + ("\n" + doc[nxt + 1:] if nxt >= 0 else "")
else:
    doc = doc.rstrip("\n") + "\n\n" + section
open(docs_path, "w").write(doc)
