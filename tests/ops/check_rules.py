#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0

"""Checks kvrelay's Prometheus rules (deploy/prometheus/) with promtool and holds them to what
docs/operations.md and the PrometheusRule promise.

  1. `promtool check rules` on the rules file, `promtool test rules` on its unit tests;
  2. every alert has a promtool case where it fires and one where it stays quiet;
  3. every alert's `runbook_url` annotation links a section of docs/operations.md that exists,
     in the repository CMakeLists.txt names (HOMEPAGE_URL), and no alert has a relative `runbook`;
  4. the PrometheusRule in deploy/kubernetes/monitoring/ carries exactly the same groups.

Usage: check_rules.py REPO_ROOT    Exit 0 pass, 1 fail, 77 skip (promtool or PyYAML missing;
with CI=true that is a failure, exit 1).
"""
import os
import re
import shutil
import subprocess
import sys


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
TESTS = "deploy/prometheus/kvrelay-rules.test.yaml"
OPERATOR_RULE = "deploy/kubernetes/monitoring/prometheusrule.yaml"
RUNBOOK = "docs/operations.md"


def github_anchor(heading):
    # GitHub's heading ids: lower case, punctuation dropped, spaces to dashes.
    return re.sub(r"[^a-z0-9 _-]", "", heading.strip().lower()).replace(" ", "-")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    root = sys.argv[1]
    promtool = shutil.which("promtool")
    if not promtool:
        cannot_run("promtool is not installed (Debian package prometheus)")
    failures = []
    for args in (["check", "rules", RULES], ["test", "rules", TESTS]):
        r = subprocess.run([promtool] + args, cwd=root, capture_output=True, text=True)
        print(f"$ promtool {' '.join(args)}\n{(r.stdout + r.stderr).strip()}")
        if r.returncode != 0:
            failures.append(f"promtool {' '.join(args)} exits {r.returncode}")

    with open(os.path.join(root, RULES)) as f:
        rules = yaml.safe_load(f)
    with open(os.path.join(root, TESTS)) as f:
        tests = yaml.safe_load(f)
    alerts = {r["alert"]: r for g in rules["groups"] for r in g["rules"] if "alert" in r}
    fires, quiet = set(), set()
    for t in tests["tests"]:
        for case in t.get("alert_rule_test", []):
            (fires if case.get("exp_alerts") else quiet).add(case["alertname"])
    for name in sorted(alerts):
        if name not in fires:
            failures.append(f"{name}: no promtool case where it fires")
        if name not in quiet:
            failures.append(f"{name}: no promtool case where it stays quiet")
    for name in sorted((fires | quiet) - set(alerts)):
        failures.append(f"{TESTS} tests {name}, which {RULES} does not define")

    with open(os.path.join(root, RUNBOOK)) as f:
        anchors = {github_anchor(m.group(1)) for m in re.finditer(r"^#+ (.+)$", f.read(), re.M)}
    with open(os.path.join(root, "CMakeLists.txt")) as f:
        m = re.search(r'HOMEPAGE_URL "([^"]+)"', f.read())
    base = (m.group(1) if m else "<no HOMEPAGE_URL in CMakeLists.txt>") + "/blob/main/"
    for name, rule in sorted(alerts.items()):
        annotations = rule.get("annotations", {})
        if "runbook" in annotations:
            failures.append(f"{name}: a relative `runbook` annotation; alert managers link `runbook_url`")
        url = annotations.get("runbook_url", "")
        page, _, anchor = url.partition("#")
        if page != base + RUNBOOK or anchor not in anchors:
            failures.append(f"{name}: runbook_url {url!r} is not {base}{RUNBOOK}#<a section of it>")

    path = os.path.join(root, OPERATOR_RULE)
    if os.path.exists(path):
        with open(path) as f:
            cr = yaml.safe_load(f)
        if cr.get("kind") != "PrometheusRule" or cr.get("spec", {}).get("groups") != rules["groups"]:
            failures.append(f"{OPERATOR_RULE}: spec.groups differ from {RULES}: run deploy/prometheus/make-prometheusrule.py")
    else:
        failures.append(f"{OPERATOR_RULE} is missing")

    for f in failures:
        print("FAIL", f)
    print(f"{len(alerts)} alerts checked, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
