#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# Builds kvrelay's OCI image without a container daemon, from Debian 12 packages:
#   1. the .deb (cmake/Packaging.cmake, build dir build/pkg, prefix /usr, no tests);
#   2. a root file system holding only that .deb and its Depends closure (mmdebstrap
#      --variant=extract: packages are unpacked, no maintainer script runs, no shell, no dpkg and
#      no apt are installed), plus netbase, and the data of base-files (os-release) and
#      ca-certificates (the CA bundle, generated here as update-ca-certificates would);
#   3. the dpkg database of what was unpacked, /etc/passwd with user 65532, no device nodes;
#   4. one reproducible layer and an OCI archive that `podman load`, `docker load` and
#      `skopeo copy` read (scripts/image_tool.py), and its SPDX SBOM from the image's dpkg database.
#
#   ./scripts/image.sh                       → build/image/kvrelay-<version>.oci.tar (+ .spdx.json,
#                                              .digest); prints size and digest
#   ./scripts/image.sh --deb path/to.deb     use a built .deb instead of building one
#   ./scripts/image.sh --out DIR             write the artefacts to DIR (default build/image)
#   ./scripts/image.sh --deb F --rootfs DIR  only the root file system, into DIR (the Containerfile's
#                                            build stage; no archive)
#
# Reproducible: SOURCE_DATE_EPOCH (default: the commit's time) fixes every timestamp, entries are
# sorted and owned by 0:0, so two builds of one commit give one digest as long as the Debian
# archive serves the same package versions (point KVRELAY_DEBIAN_MIRROR at a snapshot.debian.org
# URL to rebuild an old one). Environment:
#   KVRELAY_DEBIAN_MIRROR     default http://deb.debian.org/debian
#   KVRELAY_DEBIAN_SECURITY   default http://deb.debian.org/debian-security ("" = none)
#   KVRELAY_IMAGE_NAME        default kvrelay (the name in index.json and manifest.json)
#   KVRELAY_IMAGE_SOURCE      org.opencontainers.image.source (default: CMakeLists.txt's HOMEPAGE_URL,
#                             the project's repository)
# Needs root (mmdebstrap's root mode; chroot is not used) and apt-get: it installs mmdebstrap and
# python3 when they are missing. Downloads are kept in build/image-cache/ for the next run.
set -euo pipefail
cd "$(dirname "$0")/.."
umask 022

deb=""
out=build/image
rootfs_only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --deb) deb=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --rootfs) rootfs_only=$2; shift 2 ;;
    -h|--help) sed -n '6,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "image.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

mirror=${KVRELAY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${KVRELAY_DEBIAN_SECURITY-http://deb.debian.org/debian-security}
name=${KVRELAY_IMAGE_NAME:-kvrelay}
version=$(sed -n 's/^project(kvrelay VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
homepage=$(sed -n 's/.*HOMEPAGE_URL "\([^"]*\)".*/\1/p' CMakeLists.txt)
# The revision and date the binary carries (cmake/BuildInfo.cmake reads them the same way).
revision=$(git rev-parse HEAD 2>/dev/null || true)
if [ -n "$revision" ] && ! git diff --quiet HEAD -- 2>/dev/null; then revision="$revision-dirty"; fi
if [ -z "$revision" ] && grep -Eq '^[0-9a-f]+ [0-9]+$' cmake/revision.txt 2>/dev/null; then
  revision=$(cut -d' ' -f1 cmake/revision.txt)  # a source tarball: git archive filled it in
fi
revision=${KVRELAY_REVISION:-${revision:-unknown}}
source_url=${KVRELAY_IMAGE_SOURCE:-$homepage}
# Never the wall clock: the commit's time, so two builds of one commit are one image.
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null ||
                      { grep -Eq '^[0-9a-f]+ [0-9]+$' cmake/revision.txt && cut -d' ' -f2 cmake/revision.txt; } ||
                      true)
fi
if [ -z "$SOURCE_DATE_EPOCH" ]; then
  # Only the archive's times need it; a bare root file system (--rootfs) has none of its own.
  [ -n "$rootfs_only" ] || { echo "image.sh: no commit time (not a git checkout): set SOURCE_DATE_EPOCH" >&2; exit 1; }
  SOURCE_DATE_EPOCH=0
fi
export SOURCE_DATE_EPOCH KVRELAY_REVISION=$revision

need=()
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v python3 >/dev/null || need+=(python3)
command -v dpkg-shlibdeps >/dev/null || need+=(dpkg-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "image.sh: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "image.sh: needs root (mmdebstrap root mode; the layer keeps files' modes and owners)" >&2
  exit 1
fi

t0=$(date +%s)
# -- 1. the .deb -----------------------------------------------------------------------------------
if [ -z "$deb" ]; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1  # same objects as build/default: ccache hits
  cmake -S . -B build/pkg -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
    -DKVRELAY_BUILD_TESTS=OFF -DKVRELAY_BUILD_BENCH=OFF >/dev/null
  cmake --build build/pkg -j2
  rm -f build/pkg/kvrelay_*.deb
  (cd build/pkg && cpack -G DEB >/dev/null)
  deb=$(ls build/pkg/kvrelay_*.deb)
fi
deb=$(readlink -f "$deb")
echo "image.sh: package $deb"
t_deb=$(date +%s)

# -- 2. the root file system -----------------------------------------------------------------------
work=$(readlink -f build/image-work)
cache=$(readlink -f build/image-cache)
rm -rf "$work"
mkdir -p "$work" "$cache/archives" "$cache/lists" "$out"
rootfs=$work/rootfs
sources="deb $mirror bookworm main
deb $mirror bookworm-updates main"
[ -n "$security" ] && sources="$sources
deb $security bookworm-security main"
# Data-only packages: their Depends (openssl, debconf, awk) serve maintainer scripts, which do
# not run in the image; only their files are unpacked.
data_only="base-files ca-certificates"
# mmdebstrap wants a local .deb at the same path inside the tree (it is removed after extraction).
# The extract hook records what apt resolved ("name version") and fetches the data-only
# packages with the same apt configuration, so one index state decides every version.
export KVRELAY_IMAGE_WORK=$work KVRELAY_IMAGE_DATA_ONLY=$data_only KVRELAY_IMAGE_DEB=$deb
mmdebstrap --mode=root --variant=extract --format=directory --skip=chroot/mount --architectures="$(dpkg --print-architecture)" \
  --include="$deb" --include=netbase \
  --setup-hook=/usr/share/mmdebstrap/hooks/merged-usr/setup00.sh \
  --setup-hook='mkdir -p "$1/var/cache/apt/archives/partial" "$1/var/lib/apt/lists/partial"' \
  --setup-hook='mkdir -p "$1$(dirname "$KVRELAY_IMAGE_DEB")" && cp "$KVRELAY_IMAGE_DEB" "$1$KVRELAY_IMAGE_DEB"' \
  --setup-hook="sync-in $cache/lists /var/lib/apt/lists" \
  --setup-hook="sync-in $cache/archives /var/cache/apt/archives" \
  --extract-hook='APT_CONFIG="$MMDEBSTRAP_APT_CONFIG" apt-get install -s -qq --no-install-recommends "$KVRELAY_IMAGE_DEB" netbase | sed -n "s/^Inst \([^ ]*\) (\([^ ]*\) .*/\1 \2/p" > "$KVRELAY_IMAGE_WORK/packages"' \
  --extract-hook='cd "$1/var/cache/apt/archives" && APT_CONFIG="$MMDEBSTRAP_APT_CONFIG" apt-get download -qq $KVRELAY_IMAGE_DATA_ONLY && for p in $KVRELAY_IMAGE_DATA_ONLY; do APT_CONFIG="$MMDEBSTRAP_APT_CONFIG" apt-cache show --no-all-versions "$p" | sed -n "s/^Version: /$p /p"; done >> "$KVRELAY_IMAGE_WORK/packages"' \
  --extract-hook='rm -f "$1$KVRELAY_IMAGE_DEB" && rmdir -p --ignore-fail-on-non-empty "$1$(dirname "$KVRELAY_IMAGE_DEB")"' \
  --extract-hook="sync-out /var/cache/apt/archives $cache/archives" \
  --extract-hook="sync-out /var/lib/apt/lists $cache/lists" \
  bookworm "$rootfs" "$sources"

# The data-only packages: files only (base-files' os-release, ca-certificates' certificates).
for p in $data_only; do
  v=$(sed -n "s/^$p //p" "$work/packages")
  f=$(ls "$cache/archives/${p}_"*.deb | while read -r d; do
        [ "$(dpkg-deb -f "$d" Version)" = "$v" ] && echo "$d"; done | head -n 1)
  [ -n "$f" ] || { echo "image.sh: $p $v was not downloaded" >&2; exit 1; }
  dpkg-deb --fsys-tarfile "$f" | tar -x -C "$rootfs" --keep-directory-symlink
done

t_rootfs=$(date +%s)
# -- 3. what the packages' maintainer scripts and a container runtime would expect -----------------
python3 scripts/image_tool.py dpkg-db "$rootfs" "$cache/archives" "$work/packages" "$deb"
# The CA bundle, as update-ca-certificates writes it (every certificate ca-certificates ships,
# concatenated); gRPC reads this file first when server.ca_file is not set.
mkdir -p "$rootfs/etc/ssl/certs"
find "$rootfs/usr/share/ca-certificates" -name '*.crt' | LC_ALL=C sort |
  while read -r c; do cat "$c"; done > "$rootfs/etc/ssl/certs/ca-certificates.crt"
# Users: root and 65532 ("nonroot", as distroless names it). Kubernetes' runAsUser: 65532 without
# runAsGroup takes the group from this file, so it must say 65532 here.
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin\n' \
  > "$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' > "$rootfs/etc/group"
printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n' > "$rootfs/etc/nsswitch.conf"
mkdir -p "$rootfs/home/nonroot" && chown 65532:65532 "$rootfs/home/nonroot" && chmod 0700 "$rootfs/home/nonroot"
# Runtimes mount /dev, /proc, /sys and the resolver files; the image holds empty mount points.
rm -rf "$rootfs/dev" "$rootfs/proc" "$rootfs/sys" "$rootfs/run" "$rootfs/tmp"
mkdir -p "$rootfs/dev" "$rootfs/proc" "$rootfs/sys" "$rootfs/run"
install -d -m 1777 "$rootfs/tmp"
rm -f "$rootfs/etc/resolv.conf" "$rootfs/etc/hostname" "$rootfs/etc/machine-id"
# No package manager state: apt is not in the image; its configuration and lists were the build's.
rm -rf "$rootfs/etc/apt" "$rootfs/var/lib/apt" "$rootfs/var/cache/apt" "$rootfs/var/log/apt" \
  "$rootfs/etc/dpkg" "$rootfs/var/cache/ldconfig" "$rootfs/var/log/dpkg.log" \
  "$rootfs/var/lib/dpkg/status-old" "$rootfs/var/lib/dpkg/lock" "$rootfs/var/lib/dpkg/lock-frontend" \
  "$rootfs/var/lib/dpkg/triggers/Lock"
# Documentation stays out but for the licences (copyright files and common-licenses).
find "$rootfs/usr/share/doc" -mindepth 1 -maxdepth 1 -type d | while read -r d; do
  find "$d" -mindepth 1 ! -name copyright -delete 2>/dev/null || true
done
rm -rf "$rootfs/usr/share/man" "$rootfs/usr/share/info" "$rootfs/usr/share/locale" \
  "$rootfs/usr/share/lintian" "$rootfs/usr/share/bug"
# Scripts that cannot run without a shell, and glibc's iconv modules (8 MB; kvrelay converts no
# character sets, and UTF-8/ASCII are built into libc).
rm -rf "$rootfs/usr/sbin/update-ca-certificates" "$rootfs/etc/ca-certificates/update.d" \
  "$rootfs/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)/gconv"

# What the image must not hold: a shell, a package manager.
bad=""
for f in bin/sh bin/bash bin/dash bin/busybox usr/bin/sh usr/bin/bash usr/bin/dash usr/bin/busybox \
         usr/bin/dpkg usr/bin/apt usr/bin/apt-get usr/bin/perl usr/bin/python3; do
  if [ -e "$rootfs/$f" ] || [ -L "$rootfs/$f" ]; then bad="$bad /$f"; fi
done
[ -z "$bad" ] || { echo "image.sh: the image holds$bad" >&2; exit 1; }

if [ -n "$rootfs_only" ]; then
  mkdir -p "$rootfs_only"
  cp -a "$rootfs/." "$rootfs_only/"
  echo "image.sh: root file system in $rootfs_only"
  exit 0
fi

# -- 4. layer, archive, SBOM -----------------------------------------------------------------------
# A directory's time is that of the last package unpacked into it, and mmdebstrap's order follows
# its download cache (a cold and a warm cache differ): every directory gets SOURCE_DATE_EPOCH.
# Files and links keep their packages' times (or SOURCE_DATE_EPOCH when newer, below).
find "$rootfs" -type d -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +
(cd "$rootfs" && LC_ALL=C ls -A | LC_ALL=C sort) > "$work/top"
tar --create --file="$work/layer.tar" --directory="$rootfs" --sort=name --format=posix \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime --owner=0 --group=0 --numeric-owner \
  --no-xattrs --no-acls --no-selinux --files-from="$work/top"
archive=$out/kvrelay-$version.oci.tar
digest=$(python3 scripts/image_tool.py oci "$work/layer.tar" "$archive" --version "$version" \
  --revision "$revision" --source "$source_url" --name "$name" --vendor "The kvrelay Authors")
python3 scripts/image_tool.py sbom "$archive" "$out/kvrelay-$version.spdx.json" >/dev/null
echo "$digest" > "$out/kvrelay-$version.digest"

layer_bytes=$(python3 -c 'import json,sys,tarfile; t=tarfile.open(sys.argv[1]); m=json.load(t.extractfile("blobs/sha256/"+json.load(t.extractfile("index.json"))["manifests"][0]["digest"][7:])); print(m["layers"][0]["size"])' "$archive")
echo "image.sh: $(wc -l < "$work/packages") Debian packages"
echo "image.sh: rootfs $(du -sb "$rootfs" | cut -f1) bytes unpacked, layer $layer_bytes bytes compressed," \
  "archive $(stat -c %s "$archive") bytes"
echo "image.sh: $archive"
echo "image.sh: digest $digest (SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH, revision $revision)"
echo "image.sh: SBOM $out/kvrelay-$version.spdx.json; took $(( $(date +%s) - t0 )) s" \
  "($(( t_deb - t0 )) s .deb, $(( t_rootfs - t_deb )) s mmdebstrap, $(( $(date +%s) - t_rootfs )) s the rest)"
