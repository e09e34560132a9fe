#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# Mutation testing of the pure protocols: does a test fail when a rule breaks? For each source
# below, every mutant of its rule code is built alone into the core unit suite and run against
# that protocol's unit tests; a mutant no test kills is a survivor, printed with its place and
# change. Not in CI (a full run takes hours on two shared cores); docs/development.md has the
# last run's figures and what each survivor is.
#
# Operators, one change per mutant, on code only (comments, strings, #-lines, member
# declarations and case labels are left alone):
#   cmp   a comparison flipped to its negation (< to >=, == to !=, ...)
#   edge  a comparison moved by its boundary (< to <=, >= to >, ...)
#   bool  && and || swapped; a unary ! dropped
#   drop  a statement removed (an assignment, an increment, a call on its own line; not a
#         declaration, return or break)
#   bound an integer literal in a comparison or a min/max/clamp made one larger
#
#   scripts/mutate.sh                       # every source, every mutant
#   scripts/mutate.sh --only memory_budget  # the sources whose path contains this
#   scripts/mutate.sh --list                # the mutants, nothing built
#   scripts/mutate.sh --max 20              # the first 20 mutants per source
#   scripts/mutate.sh --skip 84 --max 50    # mutants 85..134 of each source (a run continued)
#   scripts/mutate.sh --only budget --pick 3,17  # these mutants only (numbered as --list does)
#   scripts/mutate.sh --only debouncer --again    # the last report's survivors, found again by
#                                                 # their change and their line's text (edits
#                                                 # since moved their numbers; a line repeated
#                                                 # elsewhere is run at each place)
#
# Mutates a copy of the tree (build/mutate/src: the files git knows, committed or not), never the
# tree itself, so work and builds can go on beside a run; builds in build/mutate/build (core only,
# no gRPC or CAF, -O1, warnings not fatal: a mutant may warn). The report is
# build/mutate/report.txt: one line per mutant (killed / survived / stillborn / timeout) with
# the mutated line's text after a '|', then per source the mutants, killed, survived.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

ONLY="" LIST=0 MAX=0 SKIP=0 PICK="" AGAIN=0 TIMEOUT=120
while [[ $# -gt 0 ]]; do
  case "$1" in
    --only) ONLY="$2"; shift ;;
    --list) LIST=1 ;;
    --max) MAX="$2"; shift ;;
    --skip) SKIP="$2"; shift ;;
    --pick) PICK="$2"; shift ;;
    --again) AGAIN=1 ;;
    --timeout) TIMEOUT="$2"; shift ;;
    -h|--help) sed -n '6,36p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

OUT="$ROOT/build/mutate"
SRC="$OUT/src"
BUILD="$OUT/build"
if [[ $LIST == 0 ]]; then
  mkdir -p "$SRC"
  # Only files whose bytes differ are copied, with a new mtime: the build sees exactly those (a
  # copy that kept the tree's older mtime would leave an object built from a mutant that a killed
  # run left behind looking up to date).
  git ls-files -z --cached --others --exclude-standard | python3 -c '
import os, shutil, sys
for f in filter(None, sys.stdin.buffer.read().decode().split("\0")):
    d = os.path.join(sys.argv[1], f)
    if not os.path.isfile(f):
        continue
    if os.path.isfile(d) and open(f, "rb").read() == open(d, "rb").read():
        continue
    os.makedirs(os.path.dirname(d), exist_ok=True)
    shutil.copy(f, d)
' "$SRC"
  cd "$SRC"
  export CCACHE_BASEDIR="$SRC" CCACHE_NOHASHDIR=1
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVRELAY_CORE_ONLY=ON \
    -DKVRELAY_WERROR=OFF -DKVRELAY_COMPRESS_DEBUG=OFF \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g0 -DNDEBUG" >/dev/null
  echo "mutate: building the unmutated core suite" >&2
  cmake --build "$BUILD" --target unit_core_tests -j 2 >/dev/null
fi

exec python3 - "$BUILD" "$ONLY" "$LIST" "$MAX" "$TIMEOUT" "$OUT" "$SKIP" "$PICK" "$AGAIN" <<'PY'
import os, re, shutil, signal, subprocess, sys, time

build, only, list_only, max_per, timeout, out = (sys.argv[1], sys.argv[2], sys.argv[3] == "1",
                                                int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
skip = int(sys.argv[7])
pick = {int(n) for n in sys.argv[8].split(",") if n}
again = sys.argv[9] == "1"

DEBOUNCE = "Protocol.*:Merged.*:Target.*:Targets.*:SweepRepair*"
# (source, the unit tests that hold its rules)
SOURCES = [
    ("base/memory_budget.cpp", "BudgetGate.*:BudgetTicket.*:DeriveBounds.*:IndexBudget.*:MemoryBudget.*:ResolveBudget.*"),
    ("durable/format/snapshot_policy.cpp", "SnapshotPolicy.*"),
    ("supervision/supervision_protocol.cpp", "SupervisionProtocol.*"),
    ("actors/ingress/sequence_tracker.hpp", "SequenceTracker.*"),  # the .cpp holds only names
    ("actors/debouncer/debouncer_protocol.cpp", DEBOUNCE),
    ("actors/debouncer/target_delivery.cpp", DEBOUNCE),
]

NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
EDGE = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
DECL = re.compile(r"^\s*(static\s+|inline\s+|constexpr\s+|mutable\s+|const\s+)*"
                  r"[A-Za-z_][\w:]*(<[^;()]*>)?[\s*&]+[A-Za-z_]\w*\s*(=\s*[^;]*|\{[^;]*\})?;\s*$")
STMT_SKIP = re.compile(r"^\s*(return\b|break\b|case\b|default\b|else\b|for\b|while\b|if\b|"
                       r"switch\b|do\b|using\b|namespace\b|template\b|typedef\b|friend\b|"
                       r"public:|private:|protected:|[{}])")
DROPPABLE = re.compile(r"^\s*(\+\+|--)?[A-Za-z_][\w.\[\]>\-:]*(\(.*\))?\s*"
                       r"(\+\+|--|[-+*/|&^]?=\s*[^=].*|\(.*\))?;\s*$")


def code_mask(lines):
    """Per line, the code with comments and string/char literals blanked (same length)."""
    out, in_block = [], False
    for line in lines:
        buf, i, n = [], 0, len(line)
        while i < n:
            if in_block:
                j = line.find("*/", i)
                if j < 0:
                    buf.append(" " * (n - i)); i = n
                else:
                    buf.append(" " * (j + 2 - i)); i = j + 2; in_block = False
                continue
            c = line[i]
            if line.startswith("//", i):
                buf.append(" " * (n - i)); i = n
            elif line.startswith("/*", i):
                in_block = True
            elif c in "\"'":
                j = i + 1
                while j < n and line[j] != c:
                    j += 2 if line[j] == "\\" else 1
                buf.append(c + " " * (min(j, n - 1) - i - 1) + (c if j < n else "")); i = j + 1
            else:
                buf.append(c); i += 1
        out.append("".join(buf)[:n].ljust(n))
    return out


def mutants(path):
    lines = open(path).read().split("\n")
    masked = code_mask(lines)
    body_depth, depth = 0, 0
    for no, (line, code) in enumerate(zip(lines, masked)):
        stripped = code.strip()
        opens, closes = code.count("{"), code.count("}")
        if not stripped or stripped.startswith("#") or "static_assert" in code:
            depth += opens - closes
            continue
        declaration = bool(DECL.match(code)) and "(" not in code and "return" not in code
        if not declaration and not stripped.startswith("case "):
            # comparisons: ' op ' tokens only (templates and shifts have no spaces around)
            for m in re.finditer(r"(?<=\s)(<=|>=|==|!=|<|>)(?=\s)", code):
                op = m.group(1)
                for kind, table in (("cmp", NEGATE), ("edge", EDGE)):
                    if op in table:
                        yield no, kind, m.start(), op, table[op]
            for m in re.finditer(r"(?<=\s)(&&|\|\|)(?=\s)", code):
                yield no, "bool", m.start(), m.group(1), "||" if m.group(1) == "&&" else "&&"
            for m in re.finditer(r"!(?=[A-Za-z_(])", code):
                yield no, "bool", m.start(), "!", ""
            if re.search(r"(\s(<=|>=|==|!=|<|>)\s|std::(min|max|clamp))", code):
                for m in re.finditer(r"(?<![\w.])(\d+)(?![\w.'])", code):
                    yield no, "bound", m.start(), m.group(1), "(" + m.group(1) + " + 1)"
            if (DROPPABLE.match(code) and not STMT_SKIP.match(code) and not DECL.match(code)
                    and code.count("(") == code.count(")") and depth > 0):
                yield no, "drop", len(line) - len(line.lstrip()), line.strip(), ";"
        depth += opens - closes


def apply(path, text, m):
    no, kind, col, old, new = m
    lines = text.split("\n")
    line = lines[no]
    if kind == "drop":
        lines[no] = line[:col] + ";" + " // mutate: dropped"
    else:
        assert line[col:col + len(old)] == old, (path, no, line, old)
        lines[no] = line[:col] + new + line[col + len(old):]
    return "\n".join(lines)


def run(cmd, limit):
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        return p.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return None


originals = {}


def restore(*_):
    for path, text in originals.items():
        with open(path, "w") as f:
            f.write(text)
    originals.clear()


signal.signal(signal.SIGINT, lambda *a: (restore(), sys.exit(130)))
signal.signal(signal.SIGTERM, lambda *a: (restore(), sys.exit(143)))

report_path = os.path.join(out, "report.txt")
# --again: the last report's survivors as (source, change, line text).
survivors = set()
if again:
    if not os.path.exists(report_path):
        sys.exit(f"mutate: --again: no {report_path}")
    for entry in open(report_path):
        if entry.startswith("survived") and " | " in entry:
            head, _, line_text = entry.rstrip("\n").partition(" | ")
            _, where, change = head.split(None, 2)
            survivors.add((where.rsplit(":", 1)[0], change.strip(), line_text.strip()))
    if not survivors:
        sys.exit("mutate: --again: the last report names no survivor with its line's text")
if not list_only:
    report = open(report_path, "w")
suite = os.path.join(build, "tests", "unit_core_tests")
totals = []
t0 = time.time()
try:
    for path, tests in SOURCES:
        if only and only not in path:
            continue
        text = open(path).read()
        ms = list(mutants(path))
        # A test that fails on the tree as it is would count every mutant as killed.
        if not list_only and run([suite, f"--gtest_filter={tests}", "--gtest_brief=1"], timeout) != 0:
            sys.exit(f"mutate: {path}: its tests ({tests}) fail without a mutant; fix them first")
        first = min(skip, len(ms))  # numbered as in --list, so a continued run's lines match
        ms = ms[first:first + max_per] if max_per else ms[first:]
        if pick:
            ms = [m for n, m in enumerate(ms, first + 1) if n in pick]
        lines = text.split("\n")

        def change_of(m):
            return f"{m[1]}: {m[3]} -> {m[4]}" if m[1] != "drop" else f"drop: {m[3]}"

        if again:
            ms = [m for m in ms if (path, change_of(m), lines[m[0]].strip()) in survivors]
        counts = {"killed": 0, "survived": 0, "stillborn": 0, "timeout": 0}
        for i, m in enumerate(ms):
            no, kind, col, old, new = m
            where = f"{path}:{no + 1}"
            change = change_of(m)
            if list_only:
                print(f"{where} {change}")
                continue
            originals[path] = text
            with open(path, "w") as f:
                f.write(apply(path, text, m))
            built = run(["cmake", "--build", build, "--target", "unit_core_tests", "-j", "2"], 1800)
            if built != 0:
                outcome = "stillborn"
            else:
                rc = run([suite, f"--gtest_filter={tests}", "--gtest_brief=1"], timeout)
                outcome = "timeout" if rc is None else ("survived" if rc == 0 else "killed")
            restore()
            counts[outcome] += 1
            line = f"{outcome:9} {where} {change}"
            report.write(f"{line} | {lines[no].strip()}\n")
            report.flush()
            if outcome == "survived":
                print(line, flush=True)
            print(f"mutate: {path} {first + i + 1}/{first + len(ms)} {outcome} "
                  f"({int(time.time() - t0)} s)",
                  file=sys.stderr, flush=True)
        if not list_only:
            # A timeout is a kill: the mutant made the tests hang, and they stopped it.
            killed = counts["killed"] + counts["timeout"]
            viable = killed + counts["survived"]
            totals.append((path, viable, killed, counts["survived"], counts["stillborn"]))
        else:
            print(f"# {path}: {len(ms)} mutants", file=sys.stderr)
finally:
    restore()
    if not list_only:
        # The tree as it is again, so the build directory holds no mutant.
        run(["cmake", "--build", build, "--target", "unit_core_tests", "-j", "2"], 1800)

if not list_only:
    summary = ["", f"{'source':45} {'mutants':>8} {'killed':>7} {'survived':>9} {'stillborn':>10}"]
    for path, viable, killed, survived, stillborn in totals:
        summary.append(f"{path:45} {viable:8} {killed:7} {survived:9} {stillborn:10}")
    summary.append(f"({int(time.time() - t0)} s; mutants that did not compile are stillborn, not counted)")
    report.write("\n".join(summary) + "\n")
    report.close()
    print("\n".join(summary))
    sys.exit(1 if any(t[3] for t in totals) else 0)
PY
