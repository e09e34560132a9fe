#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
"""Licensing metadata the way the inference-cache ecosystem keeps it (REUSE: an SPDX header in
every file that can carry a comment, REUSE.toml for the rest, the licence text in LICENSES/).

  scripts/spdx-headers.py          add the header to every file that lacks one (idempotent)
  scripts/spdx-headers.py --check  list files with neither a header nor a REUSE.toml entry; exit 1

Files are git's (tracked, plus new ones not ignored). `//` comments for C++ and proto, `#` for
shell, Python, CMake, TOML, YAML, systemd units and the like (after a `#!` line). Test data,
generated files and formats without comments are covered by REUSE.toml's annotations instead.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COPYRIGHT = "SPDX-FileCopyrightText: 2026 The kvrelay Authors"
LICENSE = "SPDX-License-Identifier: Apache-2.0"

SLASH = re.compile(r".*\.(cpp|hpp|h|cc|proto)$")
HASH = re.compile(r"(.*\.(sh|py|cmake|toml|yaml|yml|service|supp)|(.*/)?CMakeLists\.txt|"
                  r"\.gitignore|Containerfile|deploy/debian/(postinst|postrm|prerm))$")


def files():
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return sorted(f for f in set(out.split("\n")) if f and os.path.isfile(os.path.join(ROOT, f)))


def glob_to_re(pattern):
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + "$")


def reuse_globs():
    """The path patterns of REUSE.toml's annotations (a small reader for its one layout)."""
    text = open(os.path.join(ROOT, "REUSE.toml")).read()
    return [glob_to_re(p) for p in re.findall(r'^\s*"([^"]+)",?\s*$', text, re.M)]


def has_header(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        head = f.read(600)
    return b"SPDX-License-Identifier:" in head


def add_header(path):
    full = os.path.join(ROOT, path)
    text = open(full).read()
    if SLASH.match(path):
        block = f"// {COPYRIGHT}\n//\n// {LICENSE}\n\n"
        text = block + text
    else:
        block = f"# {COPYRIGHT}\n#\n# {LICENSE}\n"
        if text.startswith("#!"):
            first, _, rest = text.partition("\n")
            text = first + "\n" + block + ("#\n" if rest.startswith("#") else "\n") + rest
        else:
            text = block + ("#\n" if text.startswith("#") else "\n") + text
    with open(full, "w") as f:
        f.write(text)


def main():
    check = "--check" in sys.argv[1:]
    covered = reuse_globs()
    missing, added = [], []
    for path in files():
        if any(g.match(path) for g in covered) or has_header(path):
            continue
        if not check and (SLASH.match(path) or HASH.match(path)):
            add_header(path)
            added.append(path)
        else:
            missing.append(path)
    for path in missing:
        print(f"no licence: {path} (add an SPDX header: scripts/spdx-headers.py; or a REUSE.toml entry)")
    if added:
        print(f"added the SPDX header to {len(added)} files")
    if check:
        print(f"licensing: {len(missing)} file(s) without an SPDX header or REUSE.toml entry")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
