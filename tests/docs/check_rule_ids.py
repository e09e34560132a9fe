#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
"""Checks the rule ids against where they are defined and where they are named.

  check_rule_ids.py [--root DIR] [--allow-known FILE]
  check_rule_ids.py [--root DIR] --write-known FILE
  check_rule_ids.py --self-test

Defined:
  - in the source (C++ files outside tests/): a numbered rule list in a comment that starts at
    column 0, one rule a line, `//  PT1. text` or `//  ST1 text` (`///` too; one to three
    spaces). A comment block counts as a rule list of a prefix when it defines two ids of it or
    more, so `// DB8: ...` above a function (a colon, a comma or a range after the id) is a
    citation, not a definition;
  - in docs/spec/*.md: a table row whose first cell is the id (`| D01 | ...`) or a list item
    that starts with it in bold (`- **WA1** ...`).
Named: every id in the code's comments (string literals are left out: test tables use strings
like "D12" for other things; hex literals too), in tests (test names and comments), and in the documents
(README.md, BENCHMARKS.md, docs/**.md; CHANGELOG.md is history and is not read). A range such as
`PT1-PT7` or `P01–P09` names its two ends and every defined id between them. A token is an id only when its prefix is one some
rule list defines, and in the same shape: the spec's ids are two digits (D01), the source's are
not zero-padded (DB1), so F32 and L2 are no ids; F32/F64 (float types) never are.

Findings (file:line: message), one per line, then a summary by kind:
  - an id defined twice;
  - an id named but defined nowhere;
  - a source rule id named by no test;
  - a rule list with no prefix (`//  1. ...` in a header: its rules cannot be named);
  - in docs/architecture.md, a range of rule ids that starts at a list's first rule but is not
    the whole list ("PT1-PT6" when the code has PT1-PT9), or that runs past the list.
Exit 1 on a finding. With --allow-known FILE, only a finding not listed in FILE fails (FILE
holds one finding a line without its line number, as --write-known writes it); a listed finding
that is gone is reported as fixed, to be removed from FILE. Exit 2 on bad arguments.
"""
import os
import re
import subprocess
import sys
import tempfile

ID = r"[A-Z]{1,3}[0-9]{1,3}"
# An id token: no letter before it, no digit or lower-case letter after it (test names run ids
# into words: P01SuffixEvent, D01_Tuple, A04A05Same).
TOKEN = re.compile(r"(?<![A-Za-z])([A-Z]{1,3})([0-9]{1,3})(?![0-9a-z])")
RANGE = re.compile(r"(?<![A-Za-z])([A-Z]{1,3})([0-9]{1,3})\s*[-–]\s*\1([0-9]{1,3})(?![0-9a-z])")
NOT_IDS = {"F32", "F64"}

SOURCE_EXT = (".hpp", ".h", ".cpp", ".cc")
HEADER_EXT = (".hpp", ".h")
NAMED_EXT = SOURCE_EXT + (".proto", ".py", ".sh", ".cmake", ".md")
SKIP_FILES = {"CHANGELOG.md", "tests/docs/check_rule_ids.py", "tests/docs/rule_ids_known.txt"}
SKIP_DIRS = ("build/", ".git/", "tests/fixtures/", "LICENSES/")

SRC_DEF = re.compile(r"^//+ {1,3}(" + ID + r")(?:\.\s+\S|\s+[^\s:,.\-–])")
HEX = re.compile(r"\b0[xX][0-9A-Fa-f']+\w*")
LIST_ITEM = re.compile(r"^//+ {1,3}([0-9]{1,2})\. \S")
DOC_DEF = re.compile(r"^(?:\|\s*(" + ID + r")\s*\||[-*]\s+\*\*(" + ID + r")\*\*)")


def split(ident):
    m = re.match(r"([A-Z]+)([0-9]+)$", ident)
    return m.group(1), m.group(2)


def list_files(root):
    try:
        r = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others",
                            "--exclude-standard"], capture_output=True, text=True, check=True)
        files = [f for f in r.stdout.split("\n") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, _, names in os.walk(root):
            for n in names:
                files.append(os.path.relpath(os.path.join(d, n), root).replace(os.sep, "/"))
    out = []
    for f in sorted(files):
        if f in SKIP_FILES or f.startswith(SKIP_DIRS) or not os.path.isfile(os.path.join(root, f)):
            continue
        if f.endswith(NAMED_EXT) or os.path.basename(f) == "CMakeLists.txt":
            out.append(f)
    return out


def read_lines(root, f):
    with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
        return fh.read().split("\n")


def without_strings(line):
    """A C++ line with the string and char literals of its code part blanked; comments kept."""
    out, i, n = [], 0, len(line)
    while i < n:
        c = line[i]
        if c == "/" and line.startswith("//", i):
            out.append(line[i:])
            break
        if c in "\"'":
            j = i + 1
            while j < n and line[j] != c:
                j += 2 if line[j] == "\\" else 1
            out.append(c + " " * max(0, min(j, n) - i - 1) + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


class Check:
    def __init__(self, root):
        self.root = root
        self.files = list_files(root)
        self.defs = {}  # id -> [(file, line)]
        self.source_ids = set()
        self.findings = []  # (kind, file, line, message)

    def add(self, kind, f, n, msg):
        self.findings.append((kind, f, n, msg))

    # -- definitions --------------------------------------------------------------------------
    def source_definitions(self):
        candidates = []  # (file, line, id, ids of its prefix in its comment block)
        for f in self.files:
            if not f.endswith(SOURCE_EXT) or f.startswith("tests/"):
                continue
            lines = read_lines(self.root, f)
            block = []  # (line, id) of the current column-0 comment block
            numbered = []
            for n, line in enumerate(lines + [""], 1):
                if line.startswith("//"):
                    m = SRC_DEF.match(line)
                    if m:
                        block.append((n, m.group(1)))
                    m = LIST_ITEM.match(line)
                    if m and f.endswith(HEADER_EXT):
                        numbered.append((n, int(m.group(1))))
                    continue
                for n0, ident in block:
                    same = {i for _, i in block if split(i)[0] == split(ident)[0]}
                    candidates.append((f, n0, ident, len(same)))
                self.no_prefix_list(f, numbered)
                block, numbered = [], []
        # A prefix is a rule list's when some comment block defines two of its ids or more; then
        # every definition-shaped line of that prefix is a definition (a second one, a duplicate).
        lists = {split(i)[0] for _, _, i, k in candidates if k >= 2}
        for f, n, ident, _ in candidates:
            if split(ident)[0] in lists:
                self.defs.setdefault(ident, []).append((f, n))
                self.source_ids.add(ident)

    def no_prefix_list(self, f, numbered):
        nums = [k for _, k in numbered]
        if len(nums) >= 3 and nums[:3] == [1, 2, 3]:
            self.add("a rule list with no prefix", f, numbered[0][0],
                     f"a rule list with no prefix ({max(nums)} rules numbered 1-{max(nums)}): "
                     f"its rules cannot be named unambiguously")

    def doc_definitions(self):
        for f in self.files:
            if not (f.startswith("docs/spec/") and f.endswith(".md")):
                continue
            for n, line in enumerate(read_lines(self.root, f), 1):
                m = DOC_DEF.match(line)
                if m:
                    self.defs.setdefault(m.group(1) or m.group(2), []).append((f, n))

    # -- names --------------------------------------------------------------------------------
    def shapes(self):
        """prefix -> True when its ids are zero-padded two-digit ones (D01), else False."""
        out = {}
        for ident in self.defs:
            p, d = split(ident)
            out[p] = out.get(p, False) or (len(d) > 1 and d.startswith("0"))
        return out

    def is_id(self, prefix, digits, shapes):
        if prefix not in shapes or prefix + digits in NOT_IDS:
            return False
        if shapes[prefix]:
            return len(digits) == 2
        return not digits.startswith("0")

    def names(self):
        """[(id, file, line, in_test)] for every id named outside its definitions."""
        shapes = self.shapes()
        defined_at = {(f, n) for locs in self.defs.values() for f, n in locs}
        out = []
        for f in self.files:
            cpp = f.endswith(SOURCE_EXT) or f.endswith(".proto")
            in_test = f.startswith("tests/")
            for n, line in enumerate(read_lines(self.root, f), 1):
                text = without_strings(line) if cpp else line
                text = HEX.sub(lambda m: " " * len(m.group(0)), text)
                if (f, n) in defined_at:
                    m = SRC_DEF.match(text) or DOC_DEF.match(text)
                    if m:  # the rest of a definition line may name other ids
                        text = text[m.end():]
                seen = set()
                for m in RANGE.finditer(text):
                    p, lo, hi = m.group(1), m.group(2), m.group(3)
                    if not self.is_id(p, lo, shapes) or int(hi) < int(lo) or int(hi) - int(lo) > 200:
                        continue
                    width = len(lo) if shapes[p] else 0
                    for k in range(int(lo), int(hi) + 1):
                        ident = p + (str(k).zfill(width) if width else str(k))
                        # Its ends are named; an id inside it only when it exists (a gap in the
                        # numbering is no citation).
                        if k in (int(lo), int(hi)) or ident in self.defs:
                            seen.add(ident)
                for m in TOKEN.finditer(text):
                    if self.is_id(m.group(1), m.group(2), shapes):
                        seen.add(m.group(1) + m.group(2))
                out += [(i, f, n, in_test) for i in sorted(seen)]
        return out

    # -- checks -------------------------------------------------------------------------------
    def run(self):
        self.source_definitions()
        self.doc_definitions()
        for ident, locs in sorted(self.defs.items()):
            for f, n in locs[1:]:
                self.add("an id defined twice", f, n,
                         f"{ident} defined twice (first at {locs[0][0]}:{locs[0][1]})")
        named = self.names()
        tested = {i for i, _, _, t in named if t}
        for ident, f, n, _ in named:
            if ident not in self.defs:
                self.add("an id named but defined nowhere", f, n, f"{ident} is named but defined nowhere")
        for ident in sorted(self.source_ids):
            if ident not in tested:
                f, n = self.defs[ident][0]
                self.add("a source rule id named by no test", f, n, f"rule {ident} is named by no test")
        self.architecture_ranges()
        return self

    def architecture_ranges(self):
        f = "docs/architecture.md"
        if f not in self.files:
            return
        span = {}
        for ident in self.source_ids:
            p, d = split(ident)
            lo, hi = span.get(p, (10 ** 9, -1))
            span[p] = (min(lo, int(d)), max(hi, int(d)))
        for n, line in enumerate(read_lines(self.root, f), 1):
            for m in RANGE.finditer(line):
                p, lo, hi = m.group(1), int(m.group(2)), int(m.group(3))
                # A range from the first rule claims the whole list; one from a later rule
                # (LR2-LR6) names a part on purpose, unless it runs past the list.
                if p in span and (lo, hi) != span[p] and (lo == span[p][0] or hi > span[p][1]):
                    self.add("an architecture range that is not the code's", f, n,
                             f"lists {m.group(0)}, but the code defines {p}{span[p][0]}-{p}{span[p][1]}")

    def keys(self):
        return [f"{f}: {msg}" for _, f, _, msg in self.findings]


KINDS = ["an id defined twice", "an id named but defined nowhere",
         "a source rule id named by no test", "a rule list with no prefix",
         "an architecture range that is not the code's"]


def report(check, known=None):
    new = []
    for (kind, f, n, msg), key in zip(check.findings, check.keys()):
        if known is None or key not in known:
            new.append((kind, f, n, msg))
            print(f"{f}:{n}: {msg}")
    counts = {k: 0 for k in KINDS}
    for kind, *_ in check.findings:
        counts[kind] += 1
    fixed = sorted(set(known or ()) - set(check.keys()))
    for key in fixed:
        print(f"fixed, remove from the known list: {key}")
    n_src = len(check.source_ids)
    print(f"{len(check.defs)} rule ids defined ({n_src} in source rule lists, "
          f"{len(check.defs) - n_src} in docs/spec), {len(check.files)} files read: "
          f"{len(check.findings)} finding(s): " +
          ", ".join(f"{counts[k]} {k}" for k in KINDS) +
          (f"; {len(check.findings) - len(new)} known, {len(new)} new" if known is not None else ""))
    return 1 if new else 0


# -- the checker's own test ------------------------------------------------------------------------

SELF_TEST_TREE = {
    "a/x.hpp": "#pragma once\n// Rules:\n//  AB1. First.\n//  AB2. Second.\n//  AB3 Third, said\n"
               "//       over two lines.\nint f();  // AB1: a citation in code, not a definition\n",
    "a/y.hpp": "#pragma once\n//  AB2. Defined a second time.\n//  CD1. Other.\n//  CD2. Other.\n"
               "// Steps:\n//  1. one\n//  2. two\n//  3. three\n",
    "a/y.cpp": "// CD1: a citation above a function.\nvoid g() {}\n",
    "tests/x_test.cpp": "// AB1-AB2, CD1 and CD2 are tested here; AB9 is a typo.\n"
                        "TEST(X, Q01_Works) { EXPECT_EQ(h(), \"AB7 G11\"); }  // F64 is no id\n",
    "docs/spec/rules.md": "# Rules\n\n| id | rule |\n|---|---|\n| Q01 | a documented id |\n",
    "docs/architecture.md": "# Architecture\n\nThe table (rules AB1–AB2) and CD1-CD2.\n",
}
SELF_TEST_EXPECT = {
    "an id defined twice": ["a/y.hpp: AB2 defined twice"],
    "an id named but defined nowhere": ["tests/x_test.cpp: AB9 is named but defined nowhere"],
    "a source rule id named by no test": ["a/x.hpp: rule AB3 is named by no test"],
    "a rule list with no prefix": ["a/y.hpp: a rule list with no prefix"],
    "an architecture range that is not the code's": [
        "docs/architecture.md: lists AB1–AB2, but the code defines AB1-AB3"],
}


def self_test():
    with tempfile.TemporaryDirectory() as root:
        for path, text in SELF_TEST_TREE.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w", encoding="utf-8") as fh:
                fh.write(text)
        check = Check(root).run()
        keys = check.keys()
        for k in keys:
            print(f"  found: {k}")
        failures = []
        for kind, wanted in SELF_TEST_EXPECT.items():
            for w in wanted:
                if not any(key.startswith(w) for key in keys):
                    failures.append(f"missed ({kind}): {w}")
            got = [f for f in check.findings if f[0] == kind]
            if len(got) != len(wanted):
                failures.append(f"{kind}: {len(got)} finding(s), expected {len(wanted)}")
        if set(check.defs) != {"AB1", "AB2", "AB3", "CD1", "CD2", "Q01"}:
            failures.append(f"definitions read: {sorted(check.defs)}")
    for f in failures:
        print(f"self-test: {f}")
    print("self-test: " + ("FAILED" if failures else f"passed ({len(keys)} findings, one of each kind)"))
    return 1 if failures else 0


def main(argv):
    root, known_file, write_file = os.getcwd(), None, None
    args = argv[1:]
    while args:
        a = args.pop(0)
        if a == "--self-test":
            return self_test()
        if a in ("--root", "--allow-known", "--write-known") and args:
            v = args.pop(0)
            if a == "--root":
                root = v
            elif a == "--allow-known":
                known_file = v
            else:
                write_file = v
        else:
            print(__doc__)
            return 2
    check = Check(os.path.abspath(root)).run()
    if write_file:
        with open(write_file, "w", encoding="utf-8") as fh:
            fh.write("# SPDX-FileCopyrightText: 2026 The kvrelay Authors\n#\n"
                     "# SPDX-License-Identifier: Apache-2.0\n#\n"
                     "# Findings of tests/docs/check_rule_ids.py still to fix, one a line (file: message);\n"
                     "# made by --write-known. Remove a line once its finding is fixed.\n")
            for key in sorted(set(check.keys())):
                fh.write(key + "\n")
        print(f"{len(set(check.keys()))} finding(s) written to {write_file}")
        return 0
    known = None
    if known_file:
        with open(known_file, encoding="utf-8") as fh:
            known = {l.rstrip("\n") for l in fh if l.strip() and not l.startswith("#")}
    return report(check, known)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
