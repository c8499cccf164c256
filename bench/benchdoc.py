"""Rewrites one section of docs/BENCHMARKS.md with a benchmark's report."""

import re


def write_section(path, heading, text):
    """Replaces the section that starts with "## <heading>" (up to the next
    "## ") with text, or appends text when there is none."""
    with open(path) as f:
        doc = f.read()
    m = re.search(r"^## " + re.escape(heading) + r".*?(?=^## |\Z)", doc, re.S | re.M)
    if m:
        doc = doc[:m.start()] + text + "\n" + doc[m.end():]
    else:
        doc = doc.rstrip("\n") + "\n\n" + text + "\n"
    with open(path, "w") as f:
        f.write(doc)


def publish(lines, doc, heading):
    """Prints a report's lines and, when doc is set, rewrites its section
    there (write_section)."""
    text = "\n".join(lines)
    print(text)
    if doc:
        write_section(doc, heading, text)
