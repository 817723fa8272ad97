#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Make the manual page dioloop.1 from README.md and docs/reference.md, so
that they never disagree: the introduction and "## Security model" of the
README, the command reference ("### Commands"), "### What a node is" and
the "## Operations" section of the reference are converted from Markdown
to man(7).

Usage: readme2man.py README.md VERSION OUTPUT [REFERENCE.md...]
(the sections are looked up in all the files given, README first)

Only the Markdown the README uses is understood: paragraphs, "-" lists
(nested by two spaces), fenced code blocks, tables, ### and #### headings,
`code`, **bold**, *emphasis* and [links](...).  Anything else is a bug in
this script, which fails loudly (exit status 1) rather than print a broken
page.
"""
import datetime
import os
import re
import sys
import time


def section(lines, heading):
    """The lines under heading, up to the next heading of its level or
    higher."""
    level = len(heading) - len(heading.lstrip("#"))
    out, inside = [], False
    for line in lines:
        m = re.match(r"^(#+) ", line)
        if inside and m and len(m.group(1)) <= level:
            break
        if inside:
            out.append(line)
        if line.rstrip() == heading:
            inside = True
    if not inside:
        sys.exit("readme2man: no section '%s' in the README" % heading)
    return out


def escape(text):
    """Escape roff specials in running text; non-ASCII characters become
    groff's \\[uXXXX] (man may feed the page to troff as Latin-1)."""
    text = text.replace("\\", "\\e")
    return "".join(c if ord(c) < 128 else "\\[u%04X]" % ord(c)
                   for c in text)


def inline(text):
    """Markdown inline markup to roff fonts."""
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for p in parts:
        if p.startswith("`") and p.endswith("`") and len(p) >= 2:
            out.append("\\fB" + escape(p[1:-1]).replace("-", "\\-") + "\\fR")
            continue
        p = escape(p)
        p = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", p)
        p = re.sub(r"\*\*([^*]+)\*\*", r"\\fB\1\\fR", p)
        p = re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])", r"\\fI\1\\fR", p)
        out.append(p)
    return "".join(out)


def line_out(text):
    """A text line that roff will not take for a request."""
    if text.startswith((".", "'")):
        return "\\&" + text
    return text


def convert(lines):
    """Markdown lines to man(7) lines."""
    out = []
    depth = 0          # open list levels (.RS for nested ones)
    i = 0

    def close_lists(to=0):
        nonlocal depth
        while depth > to:
            if depth > 1:
                out.append(".RE")
            depth -= 1

    while i < len(lines):
        line = lines[i].rstrip("\n")
        stripped = line.strip()
        if not stripped:
            i += 1
            continue
        if stripped.startswith("```"):
            close_lists()
            out += [".PP", ".RS 4", ".nf"]
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                out.append(line_out(escape(lines[i].rstrip("\n"))))
                i += 1
            out += [".fi", ".RE"]
            i += 1
            continue
        if stripped.startswith("|"):
            close_lists()
            out += [".PP", ".RS 4", ".nf"]
            while i < len(lines) and lines[i].strip().startswith("|"):
                row = lines[i].strip()
                if not re.match(r"^\|[-| :]+\|$", row):
                    cells = [c.strip() for c in row.strip("|").split("|")]
                    out.append(line_out(inline("  ".join(cells))))
                i += 1
            out += [".fi", ".RE"]
            continue
        m = re.match(r"^(#{3,4}) (.*)$", line)
        if m:
            close_lists()
            out.append(".SS " + inline(m.group(2)))
            i += 1
            continue
        if line.startswith("#"):
            sys.exit("readme2man: unexpected heading: %s" % line)
        m = re.match(r"^( *)- (.*)$", line)
        if m:
            level = len(m.group(1)) // 2 + 1
            if level > depth + 1:
                sys.exit("readme2man: list item nested too deep: %s" % line)
            while depth < level:
                depth += 1
                if depth > 1:
                    out.append(".RS 2")
            close_lists(level)
            text = [m.group(2)]
            indent = len(m.group(1)) + 2
            i += 1
            # Continuation lines: indented at least as much as the text.
            while i < len(lines):
                nxt = lines[i].rstrip("\n")
                if not nxt.strip() or re.match(r"^ *- ", nxt) or \
                        nxt.strip().startswith("```"):
                    break
                if len(nxt) - len(nxt.lstrip(" ")) < indent:
                    break
                text.append(nxt.strip())
                i += 1
            out.append(".IP \\(bu 2")
            out.append(line_out(inline(" ".join(text))))
            continue
        # A paragraph: up to a blank line or another block.
        close_lists()
        text = []
        while i < len(lines):
            nxt = lines[i].rstrip("\n")
            if not nxt.strip() or nxt.startswith("#") or \
                    re.match(r"^ *- ", nxt) or nxt.strip().startswith("```") \
                    or nxt.strip().startswith("|"):
                break
            text.append(nxt.strip())
            i += 1
        out.append(".PP")
        out.append(line_out(inline(" ".join(text))))
    close_lists()
    return out


def main(argv):
    if len(argv) < 4:
        sys.exit("usage: readme2man.py README.md VERSION OUTPUT "
                 "[REFERENCE.md...]")
    with open(argv[1], encoding="utf-8") as f:
        lines = f.readlines()
    readme = list(lines)
    for extra in argv[4:]:
        with open(extra, encoding="utf-8") as f:
            lines += ["\n"] + f.readlines()
    version = argv[2]
    # The introduction: the README's first paragraph.
    intro, started = [], False
    for line in readme[1:]:
        if line.strip():
            started = True
            intro.append(line)
        elif started:
            break
    commands = section(lines, "### Commands")
    # The synopsis: each command's usage, as the reference gives it (a
    # usage may run over two lines: join the item's first lines).
    items = re.findall(r"^- `(dioloop [a-z][^`]*)`", "".join(
        re.sub(r"\n  (?! *- )", " ", "".join(commands))), re.M)
    # Reproducible builds set SOURCE_DATE_EPOCH; otherwise today.
    when = int(os.environ.get("SOURCE_DATE_EPOCH") or time.time())
    date = datetime.datetime.fromtimestamp(
        when, datetime.timezone.utc).strftime("%Y-%m-%d")
    out = [
        '.\\" Generated from README.md and docs/reference.md by '
        'docs/readme2man.py: edit those.',
        '.TH DIOLOOP 1 "%s" "dioloop %s" "User Commands"' % (date, version),
        ".SH NAME",
        "dioloop \\- serve a directory of disk images as block nodes",
        ".SH SYNOPSIS",
    ]
    for usage in items:
        words = usage.split(" ", 2)
        out.append(".B %s" % " ".join(words[:2]))
        if len(words) > 2:
            out.append(line_out(escape(words[2]).replace("-", "\\-")))
        out.append(".br")
    out.append(".B dioloop")
    out.append("SOURCE MOUNTPOINT \\-o OPTS")
    out.append(".SH DESCRIPTION")
    out += convert(intro)
    out.append(".SH COMMANDS")
    out += convert(commands)
    out.append(".SH NODES")
    out += convert(section(lines, "### What a node is"))
    out.append(".SH OPERATIONS")
    out += convert(section(lines, "## Operations"))
    out.append(".SH SECURITY")
    out += convert(section(readme, "## Security model"))
    out += [
        ".SH EXIT STATUS",
        "0 on success, 1 on failure, 2 for bad usage or a bad argument, a "
        "path that does not exist included (after a one-line message "
        "naming it).",
        ".SH FILES",
        ".TP",
        ".I MOUNTPOINT/.dioloop/stats.json",
        "the mount's statistics (JSON).",
        ".TP",
        ".I MOUNTPOINT/.dioloop/ctl",
        "the control file behind \\fBdioloop limit\\fR and "
        "\\fBdioloop fault\\fR.",
        ".TP",
        ".I /etc/fuse.conf",
        "\\fBuser_allow_other\\fR lets users mount with "
        "\\fBallow_other\\fR.",
        ".SH SEE ALSO",
        ".BR mount (8),",
        ".BR mount.fuse3 (8),",
        ".BR fusermount3 (1),",
        ".BR fstab (5),",
        ".BR systemd.mount (5),",
        ".BR losetup (8)",
    ]
    with open(argv[3], "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
