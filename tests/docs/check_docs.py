#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
"""Fails when a document names something kvrelay does not have: a file of the repository, an
admin or engine endpoint, a flag of kvrelay or of its tools and scripts, a metric, a recording
rule, or a section another document links to.

  check_docs.py REPO_ROOT [--program NAME=PATH ...]
  check_docs.py REPO_ROOT --program ... --must-catch tests/docs/stale_example.md
      the checker's own test: passes only when it reports every kind of mistake that document
      makes on purpose.

Documents: README.md, SECURITY.md, BENCHMARKS.md, docs/*.md, docs/spec/*.md and
deploy/kubernetes/README.md
(CHANGELOG.md is history: it names what was, on purpose). What "kvrelay has" is read from the
code and the programs themselves, never from a list kept by hand:
  - files: the repository's tree (a `<placeholder>` or `*` in a path matches anything there);
  - endpoints: the admin port's routes (admin/admin_server.cpp) and the engine routes
    discovery and the scraper ask (actors/discovery/engine_fetch.cpp, /metrics);
  - flags: `--help` of every program given with --program (kvrelay, its tools), the options the
    scripts parse (scripts/*.sh, scripts/*.py), and the flags of other programs the documents
    name, each listed below with its program;
  - metrics: every `kvrelay_*` name in a string literal of the daemon's code (histograms also
    as _bucket, _sum and _count), the recording rules of deploy/prometheus/kvrelay-rules.yaml,
    and the build's own names (CMake targets and functions).
Exit 0 pass, 1 fail (one line per finding: file:line: what, and why).
"""
import glob
import os
import re
import subprocess
import sys

DOCS = ["README.md", "SECURITY.md", "BENCHMARKS.md", "docs/*.md", "docs/spec/*.md",
        "deploy/kubernetes/README.md"]

# Paths of other projects that the documents cite as sources (upstream files, not ours).
EXTERNAL_PATHS = [
    "tests/entrypoints/",  # vLLM's tests (docs/discovery.md)
    "python/sglang/",  # SGLang
    "vllm/",  # vLLM's package
    "rust/proto/",  # vLLM's Rust frontend
    "internal/",  # the reference controller (cachebox-project/inference-cache)
    "cmd/kvevent-subscriber/",  # the Go sidecar
    "uni_agent/",  # verl-project/uni-agent
    "api/",  # the reference's API package
    "gen/",  # the reference's generated code
    "libvast/", "libtenzir/",  # style anchors
]
# Paths on a running system, or made by a build: not files of the repository.
SYSTEM_PREFIXES = ("/", "build/", "dist/", "~", "./build/", "http://", "https://", "tcp://",
                   "ipc://", "inproc://", "dns:", "unix:")

# Flags of other programs the documents name, by program. A flag kvrelay's programs have is
# never needed here; one that appears here and in kvrelay's --help is fine either way.
FOREIGN_FLAGS = {
    "vllm serve": ["kv-events-config", "enable-kv-events-component-types", "port", "model", "enable-prefix-caching",
                   "api-server-count", "api-key", "kv-transfer-config", "data-parallel-size",
                   "disable-uvicorn-access-log", "lora-modules", "enable-lora",
                   "kv-cache-report-mode", "served-model-name", "host", "tensor-parallel-size"],
    "sglang.launch_server": ["kv-events-config", "enable-metrics", "dp-size", "page-size",
                             "port", "host", "model-path", "enable-hierarchical-cache"],
    "the reference controller": ["kvevent-subscriber-image"],
    "cmake / ctest / ninja / cpack": ["preset", "build", "target", "test-dir", "install",
                                      "component", "parallel", "output-on-failure", "timeout",
                                      "repeat", "schedule-random", "label-regex"],
    "gtest": ["gtest_filter", "gtest_repeat", "gtest_also_run_disabled_tests"],
    "libFuzzer": ["max_total_time", "dict"],
    "git": ["format", "prefix", "quiet", "cached", "others", "exclude-standard", "verify",
            "annotate", "sign", "detach-sign", "armor", "local-user", "verify-files", "tags"],
    "gpg / signify / sha256sum": ["verify", "import", "export", "armor", "detach-sign",
                                  "local-user", "check", "fingerprint", "keyid-format",
                                  "recv-keys", "quick-generate-key", "batch", "passphrase",
                                  "pinentry-mode", "homedir", "output", "ignore-missing"],
    "docker / podman / skopeo / umoci / kubectl / curl / promtool": [
        "kvevent-subscriber-image", "rm", "read-only", "user", "cap-drop", "security-opt",
        "network", "entrypoint", "image", "namespace", "tail", "previous", "container", "from-file",
        "fail", "silent", "header", "data", "request", "include", "dry-run", "output", "config",
        "all-namespaces", "selector", "raw", "address", "window-size", "screenshot", "dump-dom",
        "hide-scrollbars", "headless", "no-sandbox", "virtual-time-budget", "tmpfs"],
    "mmdebstrap / dpkg / apt": ["variant", "mode", "include", "print-architecture",
                                "no-install-recommends", "fsys-tarfile"],
    "perf / valgrind / time": ["call-graph", "tool", "verbose"],
    "google benchmark": ["benchmark_filter", "benchmark_counters_tabular", "benchmark_min_time",
                         "benchmark_repetitions", "benchmark_format", "benchmark_out"],
    "systemctl": ["now"],
    "chrt": ["idle"],
    "kubectl": ["from-literal"],
}

# Endpoints of other programs the documents name, by program.
FOREIGN_ENDPOINTS = {
    "vLLM": ["/sleep", "/wake_up", "/is_sleeping", "/v1/*", "/v1/completions",
             "/v1/chat/completions", "/health"],
    "the reference policy server": ["/snapshot"],
}

FINDINGS = []


def finding(doc, line, what):
    FINDINGS.append(f"{doc}:{line}: {what}")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def docs(root):
    out = []
    for pattern in DOCS:
        out += sorted(glob.glob(os.path.join(root, pattern)))
    return [os.path.relpath(p, root) for p in out if os.path.isfile(p)]


def without_code_fences(text):
    """Each line, with a flag whether it is inside a ``` block."""
    inside = False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            inside = not inside
            yield line, True
        else:
            yield line, inside


# -- files and links -------------------------------------------------------------------------

def github_anchor(heading):
    h = re.sub(r"`", "", heading.strip().lower())
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", h)
    return re.sub(r"[^a-z0-9 _-]", "", h).replace(" ", "-")


def anchors_of(path):
    seen, out = {}, set()
    for line, code in without_code_fences(read(path)):
        m = re.match(r"^#+ (.+?)\s*$", line)
        if m and not code:
            a = github_anchor(m.group(1))
            n = seen.get(a, 0)
            out.add(a if n == 0 else f"{a}-{n}")
            seen[a] = n + 1
    return out


def tracked(root):
    r = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=root,
                       capture_output=True, text=True)
    files = set(f for f in r.stdout.split("\n") if f)
    dirs = set()
    for f in files:
        parts = f.split("/")
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]))
    return files, dirs


def path_exists(root, path, files, dirs):
    path = path.rstrip("/")
    if re.search(r"[<*{]", path):
        # A placeholder (<name>), a glob (*, **) or a choice ({hpp,cpp}): something must match.
        rx = ""
        for part in re.split(r"(<[^>]*>|\*\*|\*|\{[^}]*\})", path):
            if part.startswith("<") or part.startswith("{"):
                rx += "[^/]+"
            elif part == "**":
                rx += ".*"
            elif part == "*":
                rx += "[^/]*"
            else:
                rx += re.escape(part)
        pat = re.compile(rx + "(/.*)?$")
        return any(pat.match(f) for f in files) or any(pat.match(d) for d in dirs)
    # A module named without its extension (base/log: base/log.hpp and .cpp).
    return (path in files or path in dirs or path + ".hpp" in files or path + ".cpp" in files)


def check_files(root, doc, text, files, dirs, build):
    top = {p.split("/")[0] for p in files}
    here = os.path.dirname(doc)
    for n, (line, _) in enumerate(without_code_fences(text), 1):
        # Markdown links to local files, with their anchors.
        for m in re.finditer(r"\]\(([^)\s]+)\)", line):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target) or target.startswith("mailto:"):
                continue
            page, _, anchor = target.partition("#")
            path = os.path.normpath(os.path.join(here, page)) if page else doc
            if page and not path_exists(root, path, files, dirs):
                finding(doc, n, f"links {target}, but {path} is not in the repository")
                continue
            if anchor and path.endswith(".md") and anchor not in anchors_of(os.path.join(root, path)):
                finding(doc, n, f"links {target}, but {path} has no section #{anchor}")
        # Paths in code spans and code blocks.
        for m in re.finditer(r"`([^`]+)`", line):
            span = re.sub(r"\{[^}]*\}", "{x}", m.group(1))  # kvcap.{hpp,cpp} is one path
            for token in re.split(r"[\s,;()=\"']+", span):
                check_path_token(root, doc, n, token, files, dirs, top, build)


def check_path_token(root, doc, n, token, files, dirs, top, build):
    token = token.strip(".:").rstrip("/") if token not in ("./", "../") else token
    token = token.split("#")[0]
    if not token or token.startswith(SYSTEM_PREFIXES) or token.startswith("-"):
        return
    first = token.split("/")[0]
    if "/" not in token:
        # A bare name is a file of the top level only when it has an extension we keep there.
        if token in top or not re.match(r"^[A-Z][A-Za-z0-9_-]*\.md$", token):
            return
    elif first not in top:
        return
    if any(token.startswith(p) for p in EXTERNAL_PATHS):
        return
    if re.search(r"\.\.\.|…|\$", token):
        return
    if ":" in token:  # file:line or a Go import path
        token = token.split(":")[0]
    if os.path.basename(token) in build:
        return  # a program the build makes, named where the build puts it (bench/x/bench_x)
    if not path_exists(root, token, files, dirs):
        finding(doc, n, f"names {token}, which is not in the repository")


# -- endpoints ---------------------------------------------------------------------------------

def endpoints(root):
    admin = set(re.findall(r'add\(\s*"(?:GET|POST)",\s*"(/[^"]*)"', read(os.path.join(root, "admin/admin_server.cpp"))))
    engine = set(re.findall(r'"(/[a-z0-9_/]+)"', read(os.path.join(root, "actors/discovery/engine_fetch.cpp"))))
    engine.add("/metrics")
    return admin, engine


def check_endpoints(doc, text, admin, engine):
    known = admin | engine | {e for es in FOREIGN_ENDPOINTS.values() for e in es}
    for n, (line, _) in enumerate(without_code_fences(text), 1):
        for m in re.finditer(r"`((?:GET |POST )?)(/[A-Za-z0-9_./*-]*)(?:\?[^`]*)?`", line):
            path = m.group(2)
            if path == "/" and not m.group(1):
                continue  # a root directory, not the admin page
            if path.startswith(("/usr/", "/etc/", "/proc", "/sys", "/var/", "/dev", "/tmp/",
                                "/home/", "/run/", "/opt/", "/lib", "/bin/", "/sbin/", "/root")):
                continue
            if path.endswith("/*"):
                if not any(k.startswith(path[:-1]) for k in known):
                    finding(doc, n, f"names endpoints {path}, but no route starts with {path[:-1]}")
                continue
            if path not in known:
                finding(doc, n, f"names the endpoint {path}, which neither the admin port nor an "
                                f"engine kvrelay asks has")


# -- flags ---------------------------------------------------------------------------------------

def program_flags(programs):
    out = {}
    for name, path in programs:
        try:
            r = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            FINDINGS.append(f"{path}: --help did not run: {e}")
            continue
        text = r.stdout + r.stderr
        if r.returncode not in (0, 2) or "Usage" not in text and "usage" not in text:
            FINDINGS.append(f"{path} --help exits {r.returncode} without a usage text")
        for f in re.findall(r"(?:^|[\s,\[(|])--?([a-z][a-z0-9_-]*)", text, re.M):
            out.setdefault(f, set()).add(name)
    return out


def script_flags(root):
    out = set()
    for path in glob.glob(os.path.join(root, "scripts/*.sh")) + glob.glob(os.path.join(root, "bench/**/*.sh"), recursive=True):
        for m in re.finditer(r"^\s*((?:--[a-z][a-z0-9-]*\|?)+)\)", read(path), re.M):
            out.update(f[2:] for f in m.group(1).split("|") if f)
    # The benchmark programs (google benchmark's, or with their own parser) say their flags in
    # their usage comments and texts.
    for path in glob.glob(os.path.join(root, "bench/**/*.cpp"), recursive=True):
        out.update(re.findall(r"(?<![\w-])--([a-z][a-z0-9-]*[a-z0-9])", read(path)))
    for path in (glob.glob(os.path.join(root, "scripts/*.py")) +
                 glob.glob(os.path.join(root, "bench/**/*.py"), recursive=True) +
                 glob.glob(os.path.join(root, "tests/**/*.py"), recursive=True)):
        if path.endswith("check_docs.py"):
            continue
        out.update(re.findall(r'"--([a-z][a-z0-9-]*)"', read(path)))
    return out


def check_flags(doc, text, ours, foreign):
    for n, (line, _) in enumerate(without_code_fences(text), 1):
        for m in re.finditer(r"(?<![\w/.-])--([a-z][a-z0-9_-]*[a-z0-9])", line):
            flag = m.group(1)
            if flag in ours or flag in foreign or flag in ("x", "flag"):  # "--x v", "--flag=value"
                continue
            if line[:m.start()].endswith(("not defined: ", "no `")):
                continue  # a mistyped flag quoted from an error message, or "there is no --x"
            if line[m.end():].startswith("-*"):
                # A family (--dp-*, --log-*): some flag must start with it.
                if not any(o.startswith(flag + "-") for o in ours):
                    finding(doc, n, f"names the flags --{flag}-*, but no flag starts with --{flag}-")
                continue
            finding(doc, n, f"names the flag --{flag}, which no kvrelay program or script has "
                            f"(another program's? list it in FOREIGN_FLAGS with the program)")


# -- metrics ---------------------------------------------------------------------------------------

def code_metrics(root):
    names = set()
    for d in ("actors", "base", "messages", "net", "config", "durable", "supervision", "admin",
              "daemon"):
        for path in glob.glob(os.path.join(root, d, "**/*.[ch]pp"), recursive=True):
            for lit in re.findall(r'"((?:[^"\\\n]|\\.)*)"', read(path)):
                names.update(re.findall(r"kvrelay_[a-z0-9_]+", lit))
    return names


def build_names(root):
    names = set()
    for path in glob.glob(os.path.join(root, "**/CMakeLists.txt"), recursive=True) + glob.glob(os.path.join(root, "cmake/*.cmake")):
        if "/build/" in path:
            continue
        t = read(path)
        names.update(re.findall(r"(?:add_library|add_executable|add_custom_target|kvrelay_test|function|add_test\(NAME)\(?\s*(kvrelay_[a-z0-9_]+)", t))
        names.update(re.findall(r"add_test\(NAME\s+([a-z0-9_]+)", t))
    return names


def recording_rules(root):
    return set(re.findall(r"record:\s*(\S+)", read(os.path.join(root, "deploy/prometheus/kvrelay-rules.yaml"))))


def check_metrics(doc, text, metrics, build, rules):
    known = set(metrics)
    for m in metrics:
        known.update({m + "_bucket", m + "_sum", m + "_count"})
    for n, (line, _) in enumerate(without_code_fences(text), 1):
        for m in re.finditer(r"[a-z_]+:kvrelay_[a-z0-9_]+:[a-z0-9_]+", line):
            if m.group(0) not in rules:
                finding(doc, n, f"names the recording rule {m.group(0)}, which "
                                f"deploy/prometheus/kvrelay-rules.yaml does not define")
        line = re.sub(r"[a-z_]+:kvrelay_[a-z0-9_]+:[a-z0-9_]+", " ", line)
        for m in re.finditer(r"(?<![\w/.-])(kvrelay_[a-z0-9_]*[a-z0-9])(\*|_\*)?", line):
            name, wildcard = m.group(1), m.group(2)
            if wildcard:
                if not any(k.startswith(name) for k in known | build):
                    finding(doc, n, f"names {name}*, but no metric starts with {name}")
                continue
            if name in known or name in build:
                continue
            finding(doc, n, f"names the metric {name}, which kvrelay does not export")


# What --must-catch expects the checker to say about its document: one of each kind.
MUST_CATCH = ["is not in the repository", "has no section", "names the endpoint",
              "names the flag", "names the metric", "names the recording rule"]


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    root = os.path.abspath(argv[1])
    programs = []
    only = None
    args = argv[2:]
    while args:
        if args[0] == "--program" and len(args) > 1:
            name, _, path = args[1].partition("=")
            programs.append((name, path))
            args = args[2:]
        elif args[0] == "--must-catch" and len(args) > 1:
            # The checker's own test: this document names one wrong thing of each kind.
            only = args[1]
            args = args[2:]
        else:
            print(f"unknown argument {args[0]}")
            return 2
    files, dirs = tracked(root)
    admin, engine = endpoints(root)
    ours = set(program_flags(programs)) | script_flags(root)
    if programs and "config" not in ours:
        FINDINGS.append("kvrelay --help named no --config: the flags were not read")
    foreign = {f for fl in FOREIGN_FLAGS.values() for f in fl}
    metrics, build, rules = code_metrics(root), build_names(root), recording_rules(root)
    if "kvrelay_events_total" not in metrics:
        FINDINGS.append("no kvrelay_events_total in the code's string literals: metrics not read")
    checked = [only] if only else docs(root)
    for doc in checked:
        text = read(os.path.join(root, doc))
        check_files(root, doc, text, files, dirs, build)
        check_endpoints(doc, text, admin, engine)
        if programs:
            check_flags(doc, text, ours, foreign)
        check_metrics(doc, text, metrics, build, rules)
    for f in FINDINGS:
        print(f)
    if only:
        missed = [k for k in MUST_CATCH if not any(k in f for f in FINDINGS)]
        for k in missed:
            print(f"{only}: the checker did not catch what it must: \"{k}\"")
        return 1 if missed else 0
    print(f"{len(checked)} documents checked against {len(files)} files, {len(admin)} admin and "
          f"{len(engine)} engine routes, {len(ours)} flags of kvrelay's programs and scripts, "
          f"{len(metrics)} metrics: {len(FINDINGS)} finding(s)")
    return 1 if FINDINGS else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
