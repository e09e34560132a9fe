#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0

"""Holds the Prometheus rules, the Grafana dashboard and the metrics table of docs/operations.md
to what a running kvrelay really exports (tests/ops/ops_test.cpp scrapes one and calls this).

  * every metric an expression names (rules, dashboard panels, dashboard variables) is a family
    of the scrape (a histogram's _bucket/_sum/_count count as the histogram), or a recording rule
    the rules file defines;
  * every label a selector matches on, and every label of by/without/on/ignoring, is one those
    families carry (or a label Prometheus adds to every target: job, instance, namespace, ...);
  * every dashboard expression parses (promtool check rules on a throw-away rules file);
  * the metrics table of docs/operations.md names exactly the families of the scrape.

A family absent from the scrape fails unless FAULT_ONLY lists it with the reason it cannot appear
in the test's run. A rename anywhere (code, rules, dashboard, docs) therefore fails here.

Usage: check_metric_names.py METRICS_FILE REPO_ROOT
Exit 0 pass, 1 fail, 77 skip (PyYAML missing; with CI=true that is a failure, exit 1).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def cannot_run(why):
    """Skip (exit 77) outside CI; with CI=true a check that cannot run fails (exit 1)."""
    if os.environ.get("CI") == "true":
        print(f"FAIL (CI=true, cannot run): {why}")
        sys.exit(1)
    print(f"SKIP: {why}")
    sys.exit(77)


try:
    import yaml
except ImportError:
    cannot_run("PyYAML (Debian python3-yaml) is not installed")

RULES = "deploy/prometheus/kvrelay-rules.yaml"
DASHBOARD = "deploy/grafana/kvrelay.json"
DOCS = "docs/operations.md"

# Families the test's daemon cannot export, each with the reason. ops_test drives a malformed
# batch, a crash and the scraper on purpose so that this list stays short; keep it that way.
FAULT_ONLY = {
}

# Labels Prometheus or prometheus-operator attach to every scraped series.
TARGET_LABELS = {"job", "instance", "namespace", "pod", "node", "container", "service",
                 "endpoint", "__name__"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "inf", "nan"}
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
IDENT = re.compile(r"(?<![\w.$:])([a-zA-Z_:][a-zA-Z0-9_:]*)")


def parse_scrape(text):
    """family -> (type, set of label names); sample name -> family."""
    families, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            families[name] = (kind.strip(), set())
        elif line and not line.startswith("#"):
            m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s", line)
            if not m:
                continue
            name = m.group(1)
            labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(2) or ""))
            family = name
            for suffix in ("_bucket", "_sum", "_count"):
                base = name[: -len(suffix)]
                if name.endswith(suffix) and families.get(base, ("",))[0] == "histogram":
                    family = base
            samples[name] = family
            if family in families:
                families[family][1].update(labels - {"le"})
    return families, samples


def expression_parts(expr):
    """(metric names, {metric: selector labels}, grouping labels) of a PromQL expression."""
    expr = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)   # strings (regexes, $vars) out
    expr = re.sub(r"\[[^\]]*\]", "", expr)             # ranges and subqueries
    grouping = set()
    for m in GROUPING.finditer(expr):
        grouping.update(l.strip() for l in m.group(2).split(",") if l.strip())
    expr = GROUPING.sub(" ", expr)
    selectors = {}
    for m in re.finditer(r"([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}", expr):
        labels = set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", m.group(2)))
        selectors.setdefault(m.group(1) or "", set()).update(labels)
    expr = re.sub(r"\{[^}]*\}", " ", expr)
    names = set()
    for m in IDENT.finditer(expr):
        rest = expr[m.end():].lstrip()
        if rest.startswith("(") or m.group(1) in KEYWORDS:
            continue  # a function or an operator
        names.add(m.group(1))
    return names, selectors, grouping


def dashboard_expressions(dash):
    out = []  # (where, expr)

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((f"panel {p.get('title')!r}", t["expr"]))
            walk(p.get("panels", []))

    walk(dash.get("panels", []))
    labels_of = []  # (where, expr, label) from label_values(expr, label)
    for v in dash.get("templating", {}).get("list", []):
        q = v.get("query")
        q = q.get("query", "") if isinstance(q, dict) else (q or "")
        m = re.fullmatch(r"\s*label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*", q)
        if m:
            out.append((f"variable ${v['name']}", m.group(1)))
            labels_of.append((f"variable ${v['name']}", m.group(1), m.group(2)))
    return out, labels_of


def grafana_to_promql(expr):
    expr = expr.replace("$__rate_interval", "5m").replace("$__interval", "1m")
    return re.sub(r"\$\{?[a-zA-Z_]+\}?", ".*", expr)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    metrics_file, root = sys.argv[1], sys.argv[2]
    with open(metrics_file) as f:
        families, samples = parse_scrape(f.read())
    with open(os.path.join(root, RULES)) as f:
        rules = yaml.safe_load(f)
    with open(os.path.join(root, DASHBOARD)) as f:
        dash = json.load(f)
    failures = []

    exprs = []  # (where, expr)
    recorded = {}  # name -> labels it can carry (those of its source families)
    for g in rules["groups"]:
        for r in g["rules"]:
            where = f"{RULES} {r.get('record') or r.get('alert')}"
            exprs.append((where, r["expr"]))
    dexprs, label_values = dashboard_expressions(dash)
    exprs += [(f"{DASHBOARD} {w}", e) for w, e in dexprs]

    def family_of(name):
        return samples.get(name, name if name in families else None)

    for g in rules["groups"]:
        for r in g["rules"]:
            if "record" in r:
                names, _, _ = expression_parts(r["expr"])
                labs = set()
                for n in names:
                    fam = family_of(n)
                    if fam:
                        labs |= families[fam][1]
                recorded[r["record"]] = labs

    used = set()
    for where, expr in exprs:
        names, selectors, grouping = expression_parts(expr)
        available = set(TARGET_LABELS)
        for n in sorted(names):
            if ":" in n:
                if n not in recorded:
                    failures.append(f"{where}: {n} is no recording rule of {RULES}")
                else:
                    available |= recorded[n]
                continue
            fam = family_of(n)
            if fam is None:
                base = re.sub(r"_(bucket|sum|count)$", "", n)
                if n in FAULT_ONLY or base in FAULT_ONLY:
                    continue
                failures.append(f"{where}: {n} is not exported by kvrelay")
                continue
            used.add(fam)
            labs = families[fam][1]
            available |= labs | ({"le"} if n.endswith("_bucket") else set())
            for l in sorted(selectors.get(n, set())):
                if l not in labs | TARGET_LABELS and not (l == "le" and n.endswith("_bucket")):
                    failures.append(f"{where}: {n} has no label {l!r} (it has {sorted(labs)})")
        for l in sorted(grouping):
            if l not in available:
                failures.append(f"{where}: groups by {l!r}, which none of its metrics carries")
    for where, expr, label in label_values:
        names, _, _ = expression_parts(expr)
        if label not in TARGET_LABELS and not any(
                label in families.get(family_of(n) or "", ("", set()))[1] for n in names):
            failures.append(f"{DASHBOARD} {where}: label_values of {label!r}, which "
                            f"{sorted(names)} do not carry")

    # Every dashboard expression must parse: promtool checks it as a recording rule.
    promtool = shutil.which("promtool")
    if promtool:
        doc = {"groups": [{"name": "dashboard", "rules": [
            {"record": f"dashboard:expr{i}", "expr": grafana_to_promql(e)}
            for i, (_, e) in enumerate(dexprs)]}]}
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as tmp:
            yaml.safe_dump(doc, tmp)
        r = subprocess.run([promtool, "check", "rules", tmp.name], capture_output=True, text=True)
        os.unlink(tmp.name)
        if r.returncode != 0:
            failures.append(f"{DASHBOARD}: an expression does not parse: {(r.stdout + r.stderr).strip()}")
    else:
        print("note: promtool not installed; dashboard expressions not parsed")

    # The metrics table of docs/operations.md: its first column's names, exactly the scrape's.
    with open(os.path.join(root, DOCS)) as f:
        docs = f.read()
    section = docs.split("\n## Metrics", 1)[1].split("\n## ", 1)[0]
    documented = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            documented |= {re.sub(r"\{.*", "", n) for n in re.findall(r"`([^`]+)`", first)}
    for n in sorted(documented - set(families) - set(FAULT_ONLY)):
        failures.append(f"{DOCS}: documents {n}, which kvrelay does not export")
    for n in sorted(set(families) - documented):
        failures.append(f"{DOCS}: kvrelay exports {n}, which its metrics table does not document")
    for n, reason in sorted(FAULT_ONLY.items()):
        if n in families:
            failures.append(f"FAULT_ONLY lists {n} ({reason}), but the scrape has it: drop it")

    print(f"{len(exprs)} expressions, {len(used)} families used of {len(families)} exported, "
          f"{len(recorded)} recording rules")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
