#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# Makes a release of the checked-out commit: the tag, then in dist/v<version>/ the .deb, the OCI
# image (its digest and SPDX SBOM beside it), a source tarball, SHA256SUMS of all of them, and
# SHA256SUMS.asc, a detached OpenPGP signature of that file with the release key (SECURITY.md says
# how to check it), next to the key's public half.
#
#   ./scripts/release.sh 0.1.0        (or v0.1.0)
#
# Before anything is built it checks: the checkout is clean; the version is CMakeLists.txt's;
# CHANGELOG.md has a dated section "## [<version>] - YYYY-MM-DD" and nothing under
# [Unreleased] (a change that ships must be in the release's section); the .deb's Maintainer is a
# real person or team (DEBFULLNAME/DEBEMAIL, or KVRELAY_PACKAGE_MAINTAINER), not a placeholder;
# the signing key is in the keyring and is the release key SECURITY.md documents. Then it tags the commit (an annotated tag, signed with the release key;
# an existing tag must already point at this commit) and builds. Every date comes from the commit
# (SOURCE_DATE_EPOCH = its time), never the wall clock: the binaries carry the revision and that
# date, and the image is built twice and must give one digest.
#
# Environment:
#   KVRELAY_SIGNING_KEY      the release key (a gpg key id or fingerprint in the keyring); required
#   KVRELAY_UNSIGNED=1       a rehearsal: no signature, no tag signature (the files say so)
#   KVRELAY_PACKAGE_MAINTAINER, DEBFULLNAME/DEBEMAIL   the .deb's Maintainer
#   KVRELAY_IMAGE_SOURCE and image.sh's variables
set -euo pipefail
cd "$(dirname "$0")/.."

arg=${1:-}
[ -n "$arg" ] || { echo "usage: scripts/release.sh VERSION   (e.g. 0.1.0)" >&2; exit 2; }
die() { echo "release.sh: $*" >&2; exit 1; }
version=${arg#v}
tag=v$version

# -- what must hold before anything is made ----------------------------------------------------
cmake_version=$(sed -n 's/^project(kvrelay VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[ "$version" = "$cmake_version" ] || die "$version is not the version in CMakeLists.txt ($cmake_version)"
git diff --quiet HEAD -- && git diff --cached --quiet HEAD -- || die "the checkout has changes"
commit=$(git rev-parse HEAD)
release_date=$(sed -n "s/^## \[$version\] - \([0-9]\{4\}-[0-9]\{2\}-[0-9]\{2\}\)\$/\1/p" CHANGELOG.md)
[ -n "$release_date" ] || die "CHANGELOG.md has no dated section \"## [$version] - YYYY-MM-DD\""
date -u -d "$release_date" +%F >/dev/null 2>&1 || die "CHANGELOG.md's date $release_date is not a date"
unreleased=$(awk '/^## \[Unreleased\]/{on=1; next} /^## \[/{on=0} on && /^[-*] /' CHANGELOG.md)
[ -z "$unreleased" ] || die "CHANGELOG.md has entries under [Unreleased]: move them into [$version]"

if [ -n "${KVRELAY_PACKAGE_MAINTAINER:-}" ]; then
  maintainer=$KVRELAY_PACKAGE_MAINTAINER
elif [ -n "${DEBFULLNAME:-}" ] && [ -n "${DEBEMAIL:-}" ]; then
  maintainer="$DEBFULLNAME <$DEBEMAIL>"
else
  maintainer="$(git config user.name || true) <$(git config user.email || true)>"
fi
echo "$maintainer" | grep -Eq '^[^<>]+ <[^<>@ ]+@[^<>@ ]+\.[^<>@ ]+>$' ||
  die "Maintainer \"$maintainer\" is not \"Name <email>\" (set DEBFULLNAME and DEBEMAIL)"
echo "$maintainer" | grep -Eiq '@([^>]*\.)?(invalid|example|localhost|test)(\.[a-z]+)?>$|noreply' &&
  die "Maintainer \"$maintainer\" is a placeholder; set DEBFULLNAME and DEBEMAIL"

signed=yes
if [ "${KVRELAY_UNSIGNED:-}" = 1 ]; then
  signed=no
  echo "release.sh: KVRELAY_UNSIGNED=1: a rehearsal, nothing is signed" >&2
else
  command -v gpg >/dev/null || die "gpg is not installed (Debian package gnupg)"
  [ -n "${KVRELAY_SIGNING_KEY:-}" ] ||
    die "no KVRELAY_SIGNING_KEY: the release key's id (SECURITY.md), or KVRELAY_UNSIGNED=1 to rehearse"
  gpg --batch --list-secret-keys "$KVRELAY_SIGNING_KEY" >/dev/null 2>&1 ||
    die "the release key $KVRELAY_SIGNING_KEY is not in the keyring (gpg --list-secret-keys)"
  # Only the key SECURITY.md documents signs: users check signatures against that fingerprint.
  fingerprint=$(gpg --batch --with-colons --fingerprint "$KVRELAY_SIGNING_KEY" | awk -F: '/^fpr/{print $10; exit}')
  tr -d ' ' < SECURITY.md | grep -qi "$fingerprint" ||
    die "the key $fingerprint is not the release key SECURITY.md documents"
fi

# -- the tag --------------------------------------------------------------------------------------
if existing=$(git rev-parse -q --verify "refs/tags/$tag^{commit}"); then
  [ "$existing" = "$commit" ] || die "tag $tag exists and points at $existing, not HEAD ($commit)"
  echo "release.sh: tag $tag already points at HEAD"
else
  message="kvrelay $version ($release_date)"
  if [ "$signed" = yes ]; then
    git tag -s -u "$KVRELAY_SIGNING_KEY" -m "$message" "$tag" "$commit"
  else
    git tag -a -m "$message (unsigned rehearsal)" "$tag" "$commit"
  fi
  echo "release.sh: tagged $commit as $tag"
fi

# Every time in every artefact is the commit's; the binaries name the revision.
export SOURCE_DATE_EPOCH=$(git log -1 --format=%ct "$commit")
export KVRELAY_REVISION=$commit
dist=dist/$tag
rm -rf "$dist" build/pkg
mkdir -p "$dist"

# -- the .deb, configured for this release's maintainer (a fresh build/pkg: no stale cache entry)
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake -S . -B build/pkg -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
  -DKVRELAY_BUILD_TESTS=OFF -DKVRELAY_BUILD_BENCH=OFF \
  -DKVRELAY_PACKAGE_MAINTAINER="$maintainer" >/dev/null
cmake --build build/pkg -j2
(cd build/pkg && cpack -G DEB >/dev/null)
deb=$(ls build/pkg/kvrelay_*.deb)
[ "$(dpkg-deb -f "$deb" Maintainer)" = "$maintainer" ] || die "the .deb's Maintainer is not $maintainer"
# The binary in it says which source it is.
./build/pkg/kvrelay --version | grep -qx "revision $commit" ||
  die "the built kvrelay does not name revision $commit: $(./build/pkg/kvrelay --version | sed -n 2p)"
cp "$deb" "$dist/"

# -- the image, twice: one digest or no release --------------------------------------------------
./scripts/image.sh --deb "$deb" --out "$dist/.first" >/dev/null
./scripts/image.sh --deb "$deb" --out "$dist" | tee "$dist/.image.log"
first=$(cat "$dist/.first/kvrelay-$version.digest")
second=$(cat "$dist/kvrelay-$version.digest")
[ "$first" = "$second" ] || die "two image builds gave $first and $second: not reproducible"
rm -rf "$dist/.first" "$dist/.image.log"
python3 - "$dist/kvrelay-$version.spdx.json" "$commit" <<'PY' || die "the SBOM is not what a release ships"
import json, sys
doc = json.load(open(sys.argv[1]))
image = doc["packages"][0]
assert sys.argv[2] in image["sourceInfo"], "the SBOM does not name the revision"
ours = [p for p in doc["packages"] if p["name"] == "kvrelay"]
assert ours and ours[0]["licenseDeclared"] == "Apache-2.0", "kvrelay's licence"
assert "example" not in ours[0]["supplier"] and ours[0]["supplier"] != "NOASSERTION", "supplier"
unknown = [p["name"] for p in doc["packages"][1:] if p["licenseDeclared"] == "NOASSERTION"]
assert not unknown, "packages without a licence: " + ", ".join(unknown)
PY

# -- the source, as git archive makes it (cmake/revision.txt filled in) ----------------------------
git archive --format=tar --prefix="kvrelay-$version/" "$commit" |
  gzip -n -9 > "$dist/kvrelay-$version.tar.gz"

# -- checksums and their signature ---------------------------------------------------------------
(cd "$dist" && LC_ALL=C sha256sum -- $(LC_ALL=C ls) > SHA256SUMS)
if [ "$signed" = yes ]; then
  gpg --batch --yes --armor --local-user "$KVRELAY_SIGNING_KEY" --detach-sign \
      --output "$dist/SHA256SUMS.asc" "$dist/SHA256SUMS"
  gpg --batch --yes --armor --output "$dist/kvrelay-release-key.asc" --export "$KVRELAY_SIGNING_KEY"
  gpg --batch --verify "$dist/SHA256SUMS.asc" "$dist/SHA256SUMS" 2>/dev/null ||
    die "the signature does not verify"
fi

echo "release.sh: $dist ($tag = $commit, $release_date)"
cat "$dist/SHA256SUMS"
echo "release.sh: image digest $second (built twice, identical)"
if [ "$signed" = yes ]; then
  echo "release.sh: SHA256SUMS.asc signed by $fingerprint (kvrelay-release-key.asc)"
else
  echo "release.sh: unsigned rehearsal: no SHA256SUMS.asc; the tag $tag is not signed (delete it: git tag -d $tag)"
fi
