#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
"""Checks kvrelay's OCI image (scripts/image.sh) and runs it the way the reference controller's
injector does (cachebox-project/inference-cache, internal/adapters/builtin/runtime/subscriber.go,
renderSubscriberSidecar, at 77e7298): the image's ENTRYPOINT with Args only, as UID 65532, no
privilege escalation, all capabilities dropped, read-only root file system, no volumes.

1. The archive: skopeo reads it as an OCI archive and as a Docker archive (what `podman load` and
   `docker load` read), its digest is the one image.sh printed, the config has ENTRYPOINT
   ["/usr/bin/kvrelay"], USER 65532:65532 and the OCI labels; umoci unpacks it into a runtime
   bundle, whose process is the ENTRYPOINT as 65532:65532.
2. The root file system: no shell, no package manager, only kvrelay's own programs in /usr/bin
   (not the fake engine or the demo policy server), a CA bundle, user 65532 in /etc/passwd (a
   runtime takes the group from there when only runAsUser is set), a dpkg database that lists
   kvrelay and its libraries, and an SBOM that lists exactly those packages.
3. The run, from the unpacked image's own root file system (chroot: the image's loader and
   libraries, not the host's), in a network namespace of its own (a pod's, with a pod address
   beside loopback) and a PID namespace in which kvrelay is PID 1, against the demo policy server
   and the fake engine (random workload with evictions, a replay ring, vLLM's HTTP server) on
   loopback: kvrelay learns the replay endpoint from the engine's server at the metrics URL's
   host and port, blocks are indexed under the pod's name and namespace, a BlockRemoved is
   re-reported at T2 (--ignore-block-removed=true), /metrics answers on the pod address while
   /debug/* does not, and SIGTERM ends it with exit 0. Also asserted on the running process:
   UID/GID 65532, no capabilities, no_new_privs, root mounted read-only, every mapped library
   from the image; and `kvrelay --version` names the revision the image's label does.

Usage: check_image.py OCI_TAR BUILD_DIR     (BUILD_DIR holds tools/fake-engine and policy-server)
Needs root, skopeo and umoci. Exit 0 pass, 1 fail. A kernel that forbids namespaces prints a
"SKIP: " line for step 3 and the rest still runs; with CI=true that is a failure instead (CI's
image stage exists to run the image: a stage that did not run it must not pass).
"""
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

# The injector's Args, in its order; <...> are filled in per run (subscriber.go, 77e7298).
INJECTOR_ARGS = [
    "--engine-endpoint=tcp://127.0.0.1:{zmq_port}",
    "--server={server}",
    "--replica-id=$(POD_NAME)",
    "--tenant-id=$(POD_NAMESPACE)",
    "--model-id={model}",
    "--hash-scheme=vllm",
    "--engine-metrics-url=http://127.0.0.1:{http_port}/metrics",
    "--ignore-block-removed=true",
]
POD = {"POD_NAME": "vllm-llama-7c9d5b8f6-x2k8q", "POD_NAMESPACE": "team-a"}
# What the kubelet puts in every container's environment: how kvrelay knows it runs in a pod.
KUBE_ENV = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
POD_IP = "10.250.0.2"
ADMIN_PORT = 9464  # the default: the injector passes no --admin-listen
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
UID = 65532

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL", msg, flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


# -- 1 and 2: the archive and its root file system -------------------------------------------------

def check_archive(oci_tar, work):
    digest_file = re.sub(r"\.oci\.tar$", ".digest", oci_tar)
    want = open(digest_file).read().strip() if os.path.exists(digest_file) else None
    r = run(["skopeo", "inspect", f"oci-archive:{oci_tar}"])
    if r.returncode != 0:
        fail(f"skopeo cannot read the OCI archive: {r.stderr.strip()}")
        return None
    info = json.loads(r.stdout)
    if want and info.get("Digest") != want:
        fail(f"skopeo sees digest {info.get('Digest')}, image.sh printed {want}")
    r = run(["skopeo", "inspect", f"docker-archive:{oci_tar}"])
    if r.returncode != 0:
        fail(f"skopeo cannot read it as a Docker archive (docker load): {r.stderr.strip()}")
    r = run(["skopeo", "inspect", "--config", f"oci-archive:{oci_tar}"])
    config = json.loads(r.stdout)["config"]
    if config.get("Entrypoint") != ["/usr/bin/kvrelay"]:
        fail(f"ENTRYPOINT is {config.get('Entrypoint')}")
    if config.get("Cmd"):
        fail(f"the image has a CMD {config['Cmd']}: Args replace it, a bare run would use it")
    if config.get("User") != f"{UID}:{UID}":
        fail(f"USER is {config.get('User')!r}, not {UID}:{UID}")
    labels = config.get("Labels") or {}
    for key in ("source", "version", "revision", "licenses", "created", "vendor"):
        if not labels.get("org.opencontainers.image." + key):
            fail(f"label org.opencontainers.image.{key} missing")
    if labels.get("org.opencontainers.image.licenses") != "Apache-2.0":
        fail("licenses label is not Apache-2.0")
    homepage = re.search(r'HOMEPAGE_URL "([^"]+)"', open(os.path.join(ROOT, "CMakeLists.txt")).read())
    if homepage and labels.get("org.opencontainers.image.source") != homepage.group(1):
        fail(f"source label {labels.get('org.opencontainers.image.source')!r} is not the "
             f"project's repository {homepage.group(1)}")
    revision = labels.get("org.opencontainers.image.revision", "")
    if not re.fullmatch(r"[0-9a-f]{40}(-dirty)?", revision):
        fail(f"revision label {revision!r} is not a git commit")
    # The Containerfile builds the same image for docker and podman: same user, entrypoint, env.
    cf = open(os.path.join(os.path.dirname(__file__), "..", "..", "Containerfile")).read()
    final = cf[cf.rindex("FROM scratch"):]
    if f"USER {UID}:{UID}" not in final:
        fail("Containerfile: the final stage's USER is not 65532:65532")
    if 'ENTRYPOINT ["/usr/bin/kvrelay"]' not in final:
        fail("Containerfile: the final stage's ENTRYPOINT is not [\"/usr/bin/kvrelay\"]")
    for kv in config.get("Env", []):
        if kv.split("=")[0] + "=" not in final:
            fail(f"Containerfile: no ENV {kv.split('=')[0]} (the image has {kv})")
    # What a runtime does with it: copy into an OCI layout, unpack into a bundle.
    layout = os.path.join(work, "layout")
    r = run(["skopeo", "copy", "-q", f"oci-archive:{oci_tar}", f"oci:{layout}:kvrelay"])
    if r.returncode != 0:
        fail(f"skopeo copy oci-archive: -> oci: fails: {r.stderr.strip()}")
        return None
    bundle = os.path.join(work, "bundle")
    r = run(["umoci", "unpack", "--image", f"{layout}:kvrelay", bundle])
    if r.returncode != 0:
        fail(f"umoci unpack fails: {r.stderr.strip()}")
        return None
    spec = json.load(open(os.path.join(bundle, "config.json")))
    proc = spec["process"]
    if proc["args"] != ["/usr/bin/kvrelay"]:
        fail(f"the bundle runs {proc['args']}")
    if (proc["user"].get("uid"), proc["user"].get("gid")) != (UID, UID):
        fail(f"the bundle runs as {proc['user']}")
    return {"rootfs": os.path.join(bundle, "rootfs"), "env": proc.get("env", []),
            "args": proc["args"], "revision": revision}


def check_rootfs(root, sbom_path, image_revision=""):
    def exists(p):
        return os.path.lexists(os.path.join(root, p.lstrip("/")))

    for p in ("/bin/sh", "/usr/bin/sh", "/bin/bash", "/bin/dash", "/usr/bin/busybox",
              "/usr/bin/dpkg", "/usr/bin/apt", "/usr/bin/apt-get", "/usr/bin/perl",
              "/usr/bin/python3"):
        if exists(p):
            fail(f"the image holds {p}")
    programs = sorted(os.listdir(os.path.join(root, "usr/bin")))
    want = ["kvrelay", "kvrelay-capture", "kvrelay-replay", "kvrelay-route-probe"]
    if programs != want:
        fail(f"/usr/bin holds {programs}, expected {want}")
    for d in ("usr/sbin", "sbin"):
        full = os.path.join(root, d)
        if os.path.isdir(full) and os.listdir(full):
            fail(f"/{d} is not empty: {sorted(os.listdir(full))}")
    bundle = os.path.join(root, "etc/ssl/certs/ca-certificates.crt")
    certs = open(bundle).read().count("-----BEGIN CERTIFICATE-----") if os.path.exists(bundle) else 0
    if certs < 100:
        fail(f"CA bundle has {certs} certificates")
    passwd = open(os.path.join(root, "etc/passwd")).read()
    if not re.search(rf"^[^:]+:x:{UID}:{UID}:", passwd, re.M):
        fail(f"/etc/passwd has no {UID}:{UID} entry (a runtime would run it as group 0)")
    status = open(os.path.join(root, "var/lib/dpkg/status")).read()
    pkgs = set(re.findall(r"^Package: (\S+)", status, re.M))
    for p in ("kvrelay", "libc6", "libzmq5", "ca-certificates", "base-files"):
        if p not in pkgs:
            fail(f"dpkg database lacks {p}")
    for p in ("dash", "bash", "dpkg", "apt", "perl-base", "coreutils"):
        if p in pkgs:
            fail(f"dpkg database lists {p}")
    if not os.path.exists(os.path.join(root, "usr/share/doc/kvrelay/copyright")):
        fail("no /usr/share/doc/kvrelay/copyright")
    if not os.path.exists(os.path.join(root, "etc/os-release")):
        fail("no /etc/os-release (scanners identify the distribution from it)")
    if sbom_path:
        doc = json.load(open(sbom_path))
        names = {p["name"] for p in doc["packages"] if p["SPDXID"] != "SPDXRef-Image"}
        if names != pkgs:
            fail(f"SBOM packages differ from the dpkg database: {sorted(names ^ pkgs)}")
        ours = [p for p in doc["packages"]
                if p["name"] == "kvrelay" and p["SPDXID"] != "SPDXRef-Image"]
        if not ours or ours[0]["licenseDeclared"] != "Apache-2.0":
            fail("SBOM: kvrelay is not declared Apache-2.0")
        # Every package's licence from its copyright file, every supplier a real one.
        for p in doc["packages"]:
            if p["SPDXID"] == "SPDXRef-Image":
                continue
            if p.get("licenseDeclared", "NOASSERTION") == "NOASSERTION":
                fail(f"SBOM: {p['name']} has no licence ({p.get('comment', '')})")
            if p.get("supplier", "NOASSERTION") == "NOASSERTION" or re.search(
                    r"\.invalid|example\.|<", p.get("supplier", "")):
                fail(f"SBOM: {p['name']}'s supplier is {p.get('supplier')!r}")
        refs = {e["licenseId"] for e in doc.get("hasExtractedLicensingInfos", [])}
        for p in doc["packages"]:
            for ref in re.findall(r"LicenseRef-[A-Za-z0-9.-]+", p.get("licenseDeclared", "")):
                if ref not in refs:
                    fail(f"SBOM: {p['name']} uses {ref} without its text")
        image = doc["packages"][0]
        if image_revision and image_revision not in image.get("sourceInfo", ""):
            fail(f"SBOM: the image's sourceInfo does not name revision {image_revision}")
    return pkgs


# -- 3: the run -------------------------------------------------------------------------------------

def lo_up():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ifr = struct.pack("16sh", b"lo", 0)
    flags = struct.unpack("16sh", fcntl.ioctl(s, 0x8913, ifr))[1]  # SIOCGIFFLAGS
    fcntl.ioctl(s, 0x8914, struct.pack("16sh", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP


def wait_for_line(path, pattern, proc, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path):
            m = re.search(pattern, open(path, errors="replace").read())
            if m:
                return m
        if proc.poll() is not None:
            return None
        time.sleep(0.1)
    return None


def proc_status(pid):
    out = {}
    for line in open(f"/proc/{pid}/status"):
        k, _, v = line.partition(":")
        out[k] = v.split()
    return out


def children(pid):
    try:
        return [int(x) for x in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def dump(server, dump_file):
    if os.path.exists(dump_file):
        os.unlink(dump_file)
    server.send_signal(signal.SIGUSR1)
    deadline = time.time() + 5
    while time.time() < deadline and not os.path.exists(dump_file):
        time.sleep(0.05)
    return json.load(open(dump_file)) if os.path.exists(dump_file) else {}


def tiers_held(doc):
    """{tier: prefixes} this pod's replica holds, in its tenant, model and scheme."""
    tiers = {}
    for m in doc.get("models", []):
        if m.get("tenant_id") != POD["POD_NAMESPACE"] or m.get("model_id") != MODEL:
            continue
        for p in m.get("prefixes", []):
            r = p.get("replicas", {}).get(POD["POD_NAME"])
            if r and p.get("hash_scheme") == "vllm":
                tiers[r["tier"]] = tiers.get(r["tier"], 0) + 1
    return tiers


def http_get(host, port, path):
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except OSError as e:
        return -1, str(e)


def inside(image, build, work):
    """Runs in a network and mount namespace of its own (the pod's)."""
    lo_up()
    # The pod's own address, beside loopback (what Prometheus scrapes).
    ip = shutil.which("ip")
    if ip:
        subprocess.run([ip, "link", "add", "kvr0", "type", "veth", "peer", "name", "kvr1"], check=True)
        subprocess.run([ip, "addr", "add", POD_IP + "/24", "dev", "kvr0"], check=True)
        subprocess.run([ip, "link", "set", "kvr0", "up"], check=True)
        subprocess.run([ip, "link", "set", "kvr1", "up"], check=True)
    else:
        print("SKIP: iproute2's `ip` is not installed: no pod address, /metrics is not checked on it")
    root = image["rootfs"]
    # The host's tools that set the container up, by absolute path: the process gets the
    # image's environment (PATH included) as a runtime would give it.
    tools = {t: shutil.which(t) for t in ("setpriv", "chroot", "mount", "touch")}
    logs = os.path.join(work, "logs")
    os.makedirs(logs, exist_ok=True)
    dump_file = os.path.join(work, "index.json")
    procs = []
    try:
        server_log = os.path.join(logs, "policy-server.log")
        server = subprocess.Popen(
            [os.path.join(build, "tools/policy-server/kvrelay-policy-server"),
             "--listen", "127.0.0.1:0", "--dump-file", dump_file],
            stdout=subprocess.DEVNULL, stderr=open(server_log, "w"))
        procs.append(server)
        m = wait_for_line(server_log, r"listening on (\S+)", server, 15)
        if not m:
            fail("the policy server did not start: " + open(server_log).read()[-500:])
            return
        target = m.group(1)
        engine_log = os.path.join(logs, "fake-engine.log")
        # Random workload, small capacity: evictions (BlockRemoved) within seconds. The injector
        # gives no replay endpoint; the engine's HTTP server says where its ring is.
        engine = subprocess.Popen(
            [os.path.join(build, "tools/fake-engine/kvrelay-fake-engine"),
             "-bind", "tcp://127.0.0.1:0", "--replay-bind", "tcp://127.0.0.1:0",
             "--http-port", "0", "--model", MODEL,
             "--workload", "random", "--rate", "40", "--capacity", "48", "--seed", "26"],
            stdout=subprocess.DEVNULL, stderr=open(engine_log, "w"))
        procs.append(engine)
        zmq = wait_for_line(engine_log, r"endpoint=tcp://127\.0\.0\.1:(\d+)", engine, 15)
        http = wait_for_line(engine_log, r"http listening url=http://127\.0\.0\.1:(\d+)", engine, 15)
        if not zmq or not http:
            fail("the fake engine did not start: " + open(engine_log).read()[-500:])
            return
        # Kubernetes expands $(VAR) in args from the container's env (the downward API here).
        args = [a.format(zmq_port=zmq.group(1), http_port=http.group(1), server=target,
                         model=MODEL) for a in INJECTOR_ARGS]
        args = [re.sub(r"\$\((\w+)\)", lambda v: POD.get(v.group(1), v.group(0)), a) for a in args]
        entry = " ".join(image["args"] + [f"'{a}'" for a in args])
        # The container: a PID namespace of its own (kvrelay is PID 1), the image's root
        # mounted read-only, /proc and a minimal /dev as a runtime mounts them, no privilege
        # escalation, UID/GID 65532 (no capabilities are left after the switch from root).
        launcher = f"""set -e
root='{root}'
mount={tools["mount"]}
$mount --bind "$root" "$root"
$mount -o remount,bind,ro,nosuid,nodev "$root"
$mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
$mount -t tmpfs -o nosuid,noexec,mode=755,size=1m tmpfs "$root/dev"
for d in null zero full random urandom; do
  {tools["touch"]} "$root/dev/$d"; $mount --bind "/dev/$d" "$root/dev/$d"
done
exec {tools["setpriv"]} --no-new-privs --inh-caps=-all --ambient-caps=-all \\
  {tools["chroot"]} --userspec={UID}:{UID} --groups= "$root" {entry}
"""
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
        for kv in image["env"]:
            k, _, v = kv.partition("=")
            env[k] = v
        env.update(POD)
        env.update(KUBE_ENV)
        kv_log = os.path.join(logs, "kvrelay.log")
        outer = subprocess.Popen(["unshare", "--pid", "--fork", "--", "sh", "-c", launcher],
                                 env=env, stdout=open(os.path.join(logs, "kvrelay.out"), "w"),
                                 stderr=open(kv_log, "w"))
        procs.append(outer)
        if not wait_for_line(kv_log, r"subscribed to engine KV events", outer, 20):
            fail("kvrelay did not subscribe: " + open(kv_log).read()[-1500:])
            return
        kids = children(outer.pid)
        if len(kids) != 1:
            fail(f"expected one kvrelay process under unshare, found {kids}")
            return
        pid = kids[0]
        st = proc_status(pid)
        if st["Name"] != ["kvrelay"]:
            fail(f"the container's process is {st['Name']}")
        if st["Uid"] != [str(UID)] * 4 or st["Gid"] != [str(UID)] * 4:
            fail(f"runs as uid {st['Uid']} gid {st['Gid']}")
        if st.get("Groups", []) not in ([], [str(UID)]):
            fail(f"supplementary groups {st['Groups']}")
        for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
            if int(st[cap][0], 16) != 0:
                fail(f"{cap} is {st[cap][0]}")
        if st.get("NoNewPrivs") != ["1"]:
            fail("no_new_privs is not set")
        if st.get("NSpid", ["?"])[-1] != "1":
            fail(f"kvrelay is not PID 1 in its namespace (NSpid {st.get('NSpid')})")
        if os.readlink(f"/proc/{pid}/root") != root:
            fail(f"its root is {os.readlink(f'/proc/{pid}/root')}, not the image's")
        for line in open(f"/proc/{pid}/mountinfo"):
            f = line.split()
            if f[4] == "/" and "ro" not in f[5].split(","):
                fail(f"its root is mounted {f[5]}, not read-only")
        libs = set()
        for line in open(f"/proc/{pid}/maps"):
            f = line.split()
            if len(f) >= 6 and f[5].startswith("/") and ".so" in f[5]:
                libs.add(f[5])
        outside = sorted(p for p in libs if not p.startswith(root + "/"))
        if not libs or outside:
            fail(f"libraries from outside the image: {outside[:5]}")
        # What the engine said: the replay endpoint (the injector gives none).
        code, body = http_get("127.0.0.1", ADMIN_PORT, "/debug/engines")
        origin = ""
        if code == 200:
            engines = json.loads(body)
            origin = engines[0].get("origins", {}).get("replay_endpoint", "") if engines else ""
        if not origin.startswith("discovered: GET /kv_event_sources"):
            fail(f"the replay endpoint was not learnt from the engine ({code}): {body[:500]}")
        # The pod address: the read-only endpoints answer, /debug/* does not.
        if ip:
            code, body = http_get(POD_IP, ADMIN_PORT, "/metrics")
            if code != 200:
                fail(f"/metrics on the pod address {POD_IP}:{ADMIN_PORT} answered {code}: {body[:300]}")
            elif f'revision="{image["revision"]}"' not in body:
                fail(f"kvrelay_build_info does not name the image's revision {image['revision']}")
            for path in ("/debug/tree", "/debug/engines"):
                code, body = http_get(POD_IP, ADMIN_PORT, path)
                if code != 403:
                    fail(f"{path} on the pod address answered {code}, not 403")
        # The index: blocks under the pod's identity, and a removal re-reported at T2.
        deadline = time.time() + 30
        tiers = {}
        while time.time() < deadline:
            tiers = tiers_held(dump(server, dump_file))
            if tiers.get(1, 0) > 0 and tiers.get(2, 0) > 0:
                break
            time.sleep(0.5)
        if tiers.get(1, 0) == 0:
            fail(f"no block indexed at T1 for {POD['POD_NAME']} in {POD['POD_NAMESPACE']}: {tiers}")
        if tiers.get(2, 0) == 0:
            fail(f"no removal re-reported at T2 (--ignore-block-removed=true): {tiers}")
        print(f"index: {tiers} prefixes by tier for {POD['POD_NAME']}", flush=True)
        # SIGTERM, as the kubelet sends it to the container's PID 1.
        os.kill(pid, signal.SIGTERM)
        try:
            code = outer.wait(timeout=15)
        except subprocess.TimeoutExpired:
            fail("kvrelay did not exit within 15 s of SIGTERM")
            return
        if code != 0:
            fail(f"kvrelay exited {code} after SIGTERM: " + open(kv_log).read()[-1500:])
        log = open(kv_log).read()
        if "kvevent-subscriber stopped" not in log:
            fail("no 'kvevent-subscriber stopped' line")
        bad = [line for line in log.splitlines() if line and not line.startswith("{")]
        if bad:
            fail(f"non-JSON log lines: {bad[:3]}")
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.kill()
                p.wait()
        if failures:
            for name in sorted(os.listdir(logs)):
                print(f"--- {name} (last lines)")
                print("\n".join(open(os.path.join(logs, name), errors="replace")
                                .read().splitlines()[-15:]))


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--inside":
        image = json.loads(sys.argv[2])
        inside(image, sys.argv[3], sys.argv[4])
        return 1 if failures else 0
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    oci_tar, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    for tool in ("skopeo", "umoci", "unshare", "setpriv", "chroot"):
        if not shutil.which(tool):
            print(f"FAIL {tool} is not installed (scripts/test.sh installs skopeo and umoci)")
            return 1
    work = tempfile.mkdtemp(prefix="kvrelay-image-")
    try:
        image = check_archive(oci_tar, work)
        if image:
            sbom = re.sub(r"\.oci\.tar$", ".spdx.json", oci_tar)
            check_rootfs(image["rootfs"], sbom if os.path.exists(sbom) else None,
                         image["revision"])
            probe = run(["unshare", "--net", "--mount", "--pid", "--fork", "true"])
            if probe.returncode != 0:
                why = (f"the kernel refuses namespaces here ({probe.stderr.strip()}): "
                       "the image was not run")
                if os.environ.get("CI") == "true":
                    print(f"FAIL (CI=true, cannot run): {why}")
                    failures.append(why)
                else:
                    print(f"SKIP: {why}")
            else:
                r = subprocess.run(["unshare", "--net", "--mount", "--propagation", "private",
                                    "--fork", "--", sys.executable, os.path.abspath(__file__),
                                    "--inside", json.dumps(image), build, work])
                if r.returncode != 0:
                    failures.append("the run inside the namespaces failed (above)")
        print(f"image checks: {len(failures)} failure(s)")
        return 1 if failures else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
