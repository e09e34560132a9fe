#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
"""The parts of scripts/image.sh that need exact bytes: the image's dpkg database, the OCI
archive and its SBOM. Every output is a pure function of its inputs and SOURCE_DATE_EPOCH
(sorted entries, fixed times and owners, canonical JSON), so two builds of one commit against
one state of the Debian archive give one digest.

  image_tool.py dpkg-db ROOTFS CACHE_DIR PACKAGES_FILE [DEB...]
      Writes ROOTFS/var/lib/dpkg/{status,info/*.list,info/*.md5sums} for the packages named in
      PACKAGES_FILE ("name version" lines, as apt resolved them), from their .debs: each DEB
      given (kvrelay's own), else the one in CACHE_DIR.
      mmdebstrap's extract variant unpacks packages without dpkg; this records them the way dpkg
      would have, so scanners and the SBOM see what the image holds.
  image_tool.py oci LAYER_TAR OUT_TAR --version V --revision R --source URL --name NAME
                   [--vendor WHO]
      Gzips the layer, writes an OCI image layout (config, manifest, index) plus Docker's
      manifest.json into one tar: `podman load`, `docker load` and `skopeo copy
      oci-archive:...`/`docker-archive:...` read it. Prints the manifest digest.
  image_tool.py sbom OCI_TAR OUT_JSON
      SPDX 2.3 (JSON) from the dpkg database inside the archive's layer: one package per dpkg
      package, with its version, supplier (its Maintainer), purl, dependencies and the licence
      its /usr/share/doc/<package>/copyright declares, as an SPDX expression (DEP-5 short names
      mapped to SPDX ids; other names, and files that are not DEP-5, as LicenseRefs with their
      text); the image's revision, source and build date from its labels.
"""
import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import time

DEBIAN_SUITE = "debian-12"


def epoch():
    return int(os.environ.get("SOURCE_DATE_EPOCH", "0"))


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


# -- dpkg database ---------------------------------------------------------------------------------

def deb_control(path):
    out = subprocess.run(["dpkg-deb", "-f", path], check=True, capture_output=True, text=True).stdout
    return out.rstrip("\n")


def control_field(control, name):
    m = re.search(r"^" + re.escape(name) + r": (.*)$", control, re.M)
    return m.group(1).strip() if m else ""


def index_cache(cache):
    """(package, version) -> .deb path, for every .deb in the cache."""
    found = {}
    for f in sorted(os.listdir(cache)):
        if f.endswith(".deb"):
            p = os.path.join(cache, f)
            c = deb_control(p)
            found[(control_field(c, "Package"), control_field(c, "Version"))] = p
    return found


def dpkg_db(rootfs, cache, packages_file, *extra):
    with open(packages_file) as f:
        wanted = sorted({tuple(line.split()[:2]) for line in f if line.strip()})
    debs = index_cache(cache)
    for p in extra:  # a local build may reuse a version number: the given file wins
        c = deb_control(p)
        debs[(control_field(c, "Package"), control_field(c, "Version"))] = p
    admin = os.path.join(rootfs, "var/lib/dpkg")
    info = os.path.join(admin, "info")
    os.makedirs(info, exist_ok=True)
    stanzas = []
    for name, version in wanted:
        deb = debs.get((name, version))
        if not deb:
            sys.exit(f"image_tool: no .deb for {name} {version} in {cache}")
        control = deb_control(deb)
        # dpkg writes Status right after Package; the rest as the package says.
        lines = control.split("\n")
        stanzas.append("\n".join([lines[0], "Status: install ok installed"] + lines[1:]))
        # dpkg names Multi-Arch: same packages' files <name>:<arch>.*, the others <name>.*.
        arch = control_field(control, "Architecture")
        key = f"{name}:{arch}" if control_field(control, "Multi-Arch") == "same" else name
        # The files, as dpkg's .list has them: every path, directories included, "/." first.
        listing = subprocess.run(["dpkg-deb", "--fsys-tarfile", deb], check=True,
                                 capture_output=True).stdout
        paths = ["/."]
        with tarfile.open(fileobj=io.BytesIO(listing)) as t:
            for m in t.getmembers():
                p = "/" + m.name.lstrip("./").rstrip("/")
                if p != "/":
                    paths.append(p)
        with open(os.path.join(info, key + ".list"), "w") as f:
            f.write("\n".join(paths) + "\n")
        ctrl = subprocess.run(["dpkg-deb", "--ctrl-tarfile", deb], check=True,
                              capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(ctrl)) as t:
            for m in t.getmembers():
                if m.name.lstrip("./") in ("md5sums", "conffiles"):
                    with open(os.path.join(info, key + "." + m.name.lstrip("./")), "wb") as f:
                        f.write(t.extractfile(m).read())
    with open(os.path.join(admin, "status"), "w") as f:
        f.write("\n\n".join(stanzas) + "\n")
    for name in ("available", "diversions", "statoverride"):
        open(os.path.join(admin, name), "a").close()


def native_arch():
    return subprocess.run(["dpkg", "--print-architecture"], check=True, capture_output=True,
                          text=True).stdout.strip()


# -- OCI archive -----------------------------------------------------------------------------------

def add_file(tar, name, data, mtime, mode=0o644):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mtime = mtime
    ti.mode = mode
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    tar.addfile(ti, io.BytesIO(data))


def add_dir(tar, name, mtime):
    ti = tarfile.TarInfo(name)
    ti.type = tarfile.DIRTYPE
    ti.mtime = mtime
    ti.mode = 0o755
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    tar.addfile(ti)


def full_reference(name, tag):
    # What `docker save` writes in io.containerd.image.name: a normalised reference.
    first = name.split("/")[0]
    if "/" not in name:
        name = "docker.io/library/" + name
    elif "." not in first and ":" not in first and first != "localhost":
        name = "docker.io/" + name
    return f"{name}:{tag}"


def oci(layer_tar, out_tar, version, revision, source, name, vendor=""):
    t = epoch()
    created = rfc3339(t)
    with open(layer_tar, "rb") as f:
        raw = f.read()
    diff_id = sha256(raw)
    buf = io.BytesIO()
    # mtime 0 and no file name in the gzip header: the bytes depend on the layer alone.
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9, mtime=0, filename="") as z:
        z.write(raw)
    layer = buf.getvalue()
    labels = {
        "org.opencontainers.image.title": "kvrelay",
        "org.opencontainers.image.description":
            "kvrelay: inference engines' KV-cache events to a cache-policy server (drop-in "
            "for the inference-cache kvevent-subscriber sidecar)",
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.revision": revision,
        "org.opencontainers.image.source": source,
        "org.opencontainers.image.url": source,
        "org.opencontainers.image.vendor": vendor,
        "org.opencontainers.image.licenses": "Apache-2.0",
        "org.opencontainers.image.created": created,
    }
    config = {
        "created": created,
        "architecture": oci_arch(native_arch()),
        "os": "linux",
        "config": {
            "User": "65532:65532",
            "Entrypoint": ["/usr/bin/kvrelay"],
            "Env": ["PATH=/usr/local/bin:/usr/bin:/bin",
                    "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"],
            "WorkingDir": "/",
            "StopSignal": "SIGTERM",
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{
            "created": created,
            "created_by": "scripts/image.sh: mmdebstrap --variant=extract of the kvrelay .deb "
                          "and its Debian 12 dependencies",
        }],
    }
    config_blob = canonical(config)
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": sha256(config_blob), "size": len(config_blob)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": sha256(layer), "size": len(layer)}],
        "annotations": {k: v for k, v in labels.items()},
    }
    manifest_blob = canonical(manifest)
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": sha256(manifest_blob),
            "size": len(manifest_blob),
            "annotations": {
                "org.opencontainers.image.ref.name": version,
                "io.containerd.image.name": full_reference(name, version),
            },
        }],
    }
    docker_manifest = [{  # docker save's manifest.json: the name as given
        "Config": "blobs/sha256/" + sha256(config_blob)[7:],
        "RepoTags": [f"{name}:{version}"],
        "Layers": ["blobs/sha256/" + sha256(layer)[7:]],
    }]
    blobs = {sha256(b)[7:]: b for b in (config_blob, manifest_blob, layer)}
    with tarfile.open(out_tar, "w", format=tarfile.USTAR_FORMAT) as tar:
        add_dir(tar, "blobs", t)
        add_dir(tar, "blobs/sha256", t)
        for digest in sorted(blobs):
            add_file(tar, "blobs/sha256/" + digest, blobs[digest], t)
        add_file(tar, "index.json", canonical(index), t)
        add_file(tar, "manifest.json", canonical(docker_manifest), t)
        add_file(tar, "oci-layout", canonical({"imageLayoutVersion": "1.0.0"}), t)
    print(sha256(manifest_blob))


def oci_arch(deb_arch):
    return {"amd64": "amd64", "arm64": "arm64", "armhf": "arm", "i386": "386",
            "ppc64el": "ppc64le", "s390x": "s390x", "riscv64": "riscv64"}.get(deb_arch, deb_arch)


# -- SBOM ------------------------------------------------------------------------------------------

def read_archive(oci_tar):
    """(manifest digest, config, {path: bytes} of the layer's dpkg database and copyrights)."""
    with tarfile.open(oci_tar) as t:
        index = json.load(t.extractfile("index.json"))
        mdigest = index["manifests"][0]["digest"]
        manifest = json.load(t.extractfile("blobs/sha256/" + mdigest[7:]))
        config = json.load(t.extractfile("blobs/sha256/" + manifest["config"]["digest"][7:]))
        layer = t.extractfile("blobs/sha256/" + manifest["layers"][0]["digest"][7:]).read()
    files, links = {}, {}
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(layer))) as lt:
        for m in lt.getmembers():
            n = m.name.lstrip("./")
            if m.isfile() and (n == "var/lib/dpkg/status" or
                               re.fullmatch(r"usr/share/doc/[^/]+/copyright", n)):
                files[n] = lt.extractfile(m).read()
            elif m.issym() and re.fullmatch(r"usr/share/doc/[^/]+", n) and "/" not in m.linkname:
                links[n] = m.linkname
    # A package's doc directory may link to another package's of the same source
    # (libstdc++6 -> gcc-12-base): its copyright file is that one.
    for n, target in links.items():
        theirs = files.get(f"usr/share/doc/{target}/copyright")
        if theirs is not None:
            files.setdefault(n + "/copyright", theirs)
    return mdigest, config, files


def parse_status(text):
    pkgs = []
    for stanza in text.strip().split("\n\n"):
        fields, key = {}, None
        for line in stanza.split("\n"):
            if line.startswith((" ", "\t")) and key:
                fields[key] += "\n" + line
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields.get("Status", "").endswith(" installed"):
            pkgs.append(fields)
    return sorted(pkgs, key=lambda p: p["Package"])


def spdx_id(name):
    return "SPDXRef-Package-deb-" + re.sub(r"[^A-Za-z0-9.-]", "-", name)


# Debian's DEP-5 short names (https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
# #license-short-name) as SPDX ids; lower-cased keys. A name not here becomes a LicenseRef whose
# text is the copyright file's own paragraph for it.
DEBIAN_TO_SPDX = {
    "apache-2.0": "Apache-2.0", "apache-2": "Apache-2.0",
    "artistic": "Artistic-1.0", "artistic-1.0": "Artistic-1.0", "artistic-2.0": "Artistic-2.0",
    "beerware": "Beerware",
    "bsd-2-clause": "BSD-2-Clause", "bsd-3-clause": "BSD-3-Clause", "bsd-4-clause": "BSD-4-Clause",
    "bsd-4-clause-uc": "BSD-4-Clause-UC",
    "bsl-1.0": "BSL-1.0", "boost-1.0": "BSL-1.0",
    "cc0": "CC0-1.0", "cc0-1.0": "CC0-1.0",
    "expat": "MIT", "mit": "MIT", "x11": "X11", "isc": "ISC", "zlib": "Zlib",
    "mpl-1.1": "MPL-1.1", "mpl-2.0": "MPL-2.0", "openssl": "OpenSSL",
    "gpl-1": "GPL-1.0-only", "gpl-1+": "GPL-1.0-or-later",
    "gpl-2": "GPL-2.0-only", "gpl-2.0": "GPL-2.0-only", "gpl-2+": "GPL-2.0-or-later",
    "gpl-2.0+": "GPL-2.0-or-later",
    "gpl-3": "GPL-3.0-only", "gpl-3.0": "GPL-3.0-only", "gpl-3+": "GPL-3.0-or-later",
    "gpl-3.0+": "GPL-3.0-or-later",
    "lgpl-2": "LGPL-2.0-only", "lgpl-2.0": "LGPL-2.0-only", "lgpl-2+": "LGPL-2.0-or-later",
    "lgpl-2.0+": "LGPL-2.0-or-later", "lgpl-2.1": "LGPL-2.1-only", "lgpl-2.1+": "LGPL-2.1-or-later",
    "lgpl-3": "LGPL-3.0-only", "lgpl-3.0": "LGPL-3.0-only", "lgpl-3+": "LGPL-3.0-or-later",
    "lgpl-3.0+": "LGPL-3.0-or-later",
    "public-domain": "LicenseRef-public-domain",
}
# "X with Y exception" where Y is an SPDX exception.
DEBIAN_EXCEPTIONS = {"linux-syscall-note": "Linux-syscall-note", "llvm": "LLVM-exception", "gcc-runtime": "GCC-exception-3.1",
                     "gcc": "GCC-exception-3.1", "openssl": "openvpn-openssl-exception",
                     "autoconf": "Autoconf-exception-3.0", "bison": "Bison-exception-2.2"}


def license_ref(name):
    return "LicenseRef-" + re.sub(r"[^A-Za-z0-9.-]+", "-", name).strip("-")


def spdx_expression(name, refs):
    """A DEP-5 License: value ("GPL-2+ or Artistic", "Apache-2.0 with LLVM exception") as an SPDX
    expression; names it cannot map are LicenseRefs, collected in `refs` (ref -> Debian name)."""
    alternatives = []
    for alt in re.split(r"\s+or\s+", name.strip(), flags=re.I):
        parts = []
        for part in re.split(r"\s*(?:,\s*)?\band\b\s*", alt, flags=re.I):
            part = part.strip()
            if not part:
                continue
            m = re.match(r"^(.*?)\s+with\s+(\S+)\s+exception$", part, re.I)
            base, exc = (m.group(1), m.group(2)) if m else (part, None)
            sid = DEBIAN_TO_SPDX.get(base.lower())
            if sid and exc and exc.lower() in DEBIAN_EXCEPTIONS:
                parts.append(f"{sid} WITH {DEBIAN_EXCEPTIONS[exc.lower()]}")
            elif sid and not exc:
                if sid.startswith("LicenseRef-"):
                    refs[sid] = base
                parts.append(sid)
            else:
                ref = license_ref(part)
                refs[ref] = part
                parts.append(ref)
        alternatives.append(parts[0] if len(parts) == 1 else "(" + " AND ".join(parts) + ")")
    return alternatives[0] if len(alternatives) == 1 else "(" + " OR ".join(alternatives) + ")"


def dep5(text):
    """(the License: values of the Files paragraphs, {short name: its stand-alone text}), or
    None when the file is not machine-readable (DEP-5)."""
    if not text.startswith(b"Format:"):
        return None
    used, texts = [], {}
    for p in re.split(r"\n\s*\n", text.decode("utf-8", "replace")):
        m = re.search(r"^License:[ \t]*(.*?)[ \t]*$((?:\n[ \t].*)*)", p, re.M)
        if not m:
            continue
        short, body = m.group(1).strip(), m.group(2)
        if re.search(r"^Files:", p, re.M):
            if short:
                used.append(short)
        elif short and body.strip():
            texts[short] = "\n".join(line[1:] if line.startswith(" ") else line
                                     for line in body.strip("\n").split("\n")).replace("\n.\n", "\n\n")
    return sorted(set(used)), texts


def package_licence(name, copyright_text, extracted):
    """The SPDX licence expression a package's copyright file declares; the LicenseRefs it needs
    go into `extracted` (id -> (name, text))."""
    if not copyright_text:
        return "NOASSERTION", "no /usr/share/doc/" + name + "/copyright in the image"
    parsed = dep5(copyright_text)
    if parsed is None:
        # Not machine-readable: the licence is what the file says, quoted whole.
        ref = license_ref(name + "-copyright")
        extracted[ref] = (f"/usr/share/doc/{name}/copyright",
                          copyright_text.decode("utf-8", "replace"))
        return ref, "/usr/share/doc/" + name + "/copyright is not machine-readable (DEP-5): quoted"
    used, texts = parsed
    refs = {}
    exprs = sorted({spdx_expression(u, refs) for u in used})
    for ref, debian_name in refs.items():
        text = texts.get(debian_name) or next((v for k, v in texts.items()
                                               if k.lower() == debian_name.lower()), None)
        extracted.setdefault(ref, (debian_name, text or "See /usr/share/doc/" + name +
                                   "/copyright, License: " + debian_name))
    if not exprs:
        return "NOASSERTION", "/usr/share/doc/" + name + "/copyright names no licence"
    expr = exprs[0] if len(exprs) == 1 else " AND ".join(exprs)
    return expr, "from /usr/share/doc/" + name + "/copyright (DEP-5): " + ", ".join(used)


def supplier(maintainer):
    """SPDX's supplier form, "Organization: name (email)", from a Debian Maintainer field."""
    m = re.match(r"^\s*(.*?)\s*<([^>]+)>\s*$", maintainer or "")
    if not m:
        return "NOASSERTION"
    name, email = m.group(1), m.group(2)
    kind = "Person"
    if re.search(r"team|maintainers|developers|group|project|authors", name, re.I):
        kind = "Organization"
    return f"{kind}: {name} ({email})"


def sbom(oci_tar, out_json):
    mdigest, config, files = read_archive(oci_tar)
    labels = config["config"].get("Labels", {})
    version = labels.get("org.opencontainers.image.version", "")
    revision = labels.get("org.opencontainers.image.revision", "")
    source = labels.get("org.opencontainers.image.source", "")
    created = labels.get("org.opencontainers.image.created", "")
    vendor = labels.get("org.opencontainers.image.vendor", "")
    extracted = {}
    pkgs = parse_status(files["var/lib/dpkg/status"].decode())
    names = {p["Package"] for p in pkgs}
    arch = config.get("architecture", "")
    image_id = "SPDXRef-Image"
    packages = [{
        "SPDXID": image_id,
        "name": "kvrelay",
        "versionInfo": version,
        "primaryPackagePurpose": "CONTAINER",
        "supplier": f"Organization: {vendor}" if vendor else "NOASSERTION",
        "downloadLocation": (f"git+{source}@{revision.split('-')[0]}"
                             if source.startswith("https://") and revision not in ("", "unknown")
                             else "NOASSERTION"),
        "sourceInfo": f"kvrelay {version}, git revision {revision}, built {created} (the "
                      f"commit's time)",
        "filesAnalyzed": False,
        "licenseConcluded": "NOASSERTION",
        "licenseDeclared": labels.get("org.opencontainers.image.licenses", "NOASSERTION"),
        "copyrightText": "NOASSERTION",
        "checksums": [{"algorithm": "SHA256", "checksumValue": mdigest[7:]}],
        "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                          "referenceLocator": f"pkg:oci/kvrelay@{mdigest.replace(':', '%3A')}"
                                              f"?arch={arch}&tag={version}"}],
    }]
    relationships = [{"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
                      "relatedSpdxElement": image_id}]
    for p in pkgs:
        name = p["Package"]
        parch = p.get("Architecture", "")
        ours = name == "kvrelay"
        copyright_text = files.get(f"usr/share/doc/{name}/copyright", b"")
        declared, why = package_licence(name, copyright_text, extracted)
        entry = {
            "SPDXID": spdx_id(name),
            "name": name,
            "versionInfo": p.get("Version", ""),
            # Debian's Maintainer is who supplies the package; kvrelay's own is its authors.
            "supplier": (f"Organization: {vendor}" if ours and vendor
                         else supplier(p.get("Maintainer", ""))),
            "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False,
            "licenseConcluded": "NOASSERTION",
            "licenseDeclared": declared,
            "copyrightText": "NOASSERTION",
            "comment": "licence " + why,
            "externalRefs": [{
                "referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                "referenceLocator": f"pkg:deb/debian/{name}@{p.get('Version', '').replace(':', '%3A')}"
                                    f"?arch={parch}&distro={DEBIAN_SUITE}"}],
        }
        if ours:
            entry["sourceInfo"] = f"git revision {revision} of {source}"
            if entry["downloadLocation"] == "NOASSERTION" and packages[0]["downloadLocation"]:
                entry["downloadLocation"] = packages[0]["downloadLocation"]
        elif p.get("Source"):
            entry["sourceInfo"] = "built from Debian source package " + p["Source"].split()[0]
        packages.append(entry)
        relationships.append({"spdxElementId": image_id, "relationshipType": "CONTAINS",
                              "relatedSpdxElement": spdx_id(name)})
        deps = set()
        for field in ("Pre-Depends", "Depends"):
            for alt in filter(None, (x.strip() for x in p.get(field, "").split(","))):
                for choice in alt.split("|"):
                    dep = choice.strip().split(" ")[0].split(":")[0]
                    if dep in names:
                        deps.add(dep)
                        break
        for dep in sorted(deps):
            relationships.append({"spdxElementId": spdx_id(name), "relationshipType": "DEPENDS_ON",
                                  "relatedSpdxElement": spdx_id(dep)})
    doc = {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"kvrelay-{version} image",
        "documentNamespace": f"https://spdx.org/spdxdocs/kvrelay-image-{version}-{mdigest[7:]}",
        "creationInfo": {
            "created": rfc3339(epoch()),
            "creators": ["Tool: kvrelay-scripts/image_tool.py",
                         "Organization: The kvrelay Authors"],
            "comment": "From the dpkg database (/var/lib/dpkg/status) inside the image layer.",
        },
        "documentDescribes": [image_id],
        "packages": packages,
        "hasExtractedLicensingInfos": [
            {"licenseId": ref, "name": name, "extractedText": text}
            for ref, (name, text) in sorted(extracted.items())],
        "relationships": relationships,
    }
    with open(out_json, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{len(pkgs)} packages")


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    cmd, args = argv[1], argv[2:]
    if cmd == "dpkg-db" and len(args) >= 3:
        dpkg_db(*args)
    elif cmd == "oci" and len(args) >= 2:
        opts = dict(zip(args[2::2], args[3::2]))
        oci(args[0], args[1], opts["--version"], opts["--revision"], opts["--source"],
            opts["--name"], opts.get("--vendor", ""))
    elif cmd == "sbom" and len(args) == 2:
        sbom(*args)
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
