#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# Builds a release for a tag: the .deb, the OCI image, its SPDX SBOM, a source tarball and
# SHA256SUMS, in dist/<tag>/. The checkout must be at the tag and clean.
#
#   git tag -a v0.1.0 -m 'kvrelay 0.1.0' && ./scripts/release.sh v0.1.0
#
# Checks before building: the tag names the version in CMakeLists.txt, CHANGELOG.md has a
# section for it, and the .deb's Maintainer is a real person or team (DEBFULLNAME/DEBEMAIL, or
# -DKVRELAY_PACKAGE_MAINTAINER through KVRELAY_PACKAGE_MAINTAINER here), not a placeholder.
# The image is built twice (scripts/image.sh, SOURCE_DATE_EPOCH = the tag's commit time) and the
# release stops unless both builds give one digest.
# Environment: KVRELAY_PACKAGE_MAINTAINER, KVRELAY_IMAGE_SOURCE (the repository URL for the
# org.opencontainers.image.source label; default git's origin), and image.sh's variables.
set -euo pipefail
cd "$(dirname "$0")/.."

tag=${1:-}
[ -n "$tag" ] || { echo "usage: scripts/release.sh TAG   (e.g. v0.1.0)" >&2; exit 2; }
die() { echo "release.sh: $*" >&2; exit 1; }

version=$(sed -n 's/^project(kvrelay VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[ "$tag" = "v$version" ] || die "tag $tag does not name the version in CMakeLists.txt ($version)"
commit=$(git rev-parse -q --verify "$tag^{commit}") || die "no tag $tag"
[ "$(git rev-parse HEAD)" = "$commit" ] || die "HEAD is not $tag: git checkout $tag first"
git diff --quiet HEAD && git diff --cached --quiet HEAD || die "the checkout has changes"
grep -q "^## \[$version\]" CHANGELOG.md || die "CHANGELOG.md has no \"## [$version]\" section"

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

export SOURCE_DATE_EPOCH=$(git log -1 --format=%ct "$commit")
dist=dist/$tag
rm -rf "$dist" build/pkg
mkdir -p "$dist"

# The .deb, configured for this release's maintainer (a fresh build/pkg: no stale cache entry).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake -S . -B build/pkg -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
  -DKVRELAY_BUILD_TESTS=OFF -DKVRELAY_BUILD_BENCH=OFF \
  -DKVRELAY_PACKAGE_MAINTAINER="$maintainer" >/dev/null
cmake --build build/pkg -j2
(cd build/pkg && cpack -G DEB >/dev/null)
deb=$(ls build/pkg/kvrelay_*.deb)
[ "$(dpkg-deb -f "$deb" Maintainer)" = "$maintainer" ] || die "the .deb's Maintainer is not $maintainer"
cp "$deb" "$dist/"

# The image, twice: one digest or no release.
./scripts/image.sh --deb "$deb" --out "$dist/.first" >/dev/null
./scripts/image.sh --deb "$deb" --out "$dist" | tee "$dist/.image.log"
first=$(cat "$dist/.first/kvrelay-$version.digest")
second=$(cat "$dist/kvrelay-$version.digest")
[ "$first" = "$second" ] || die "two image builds gave $first and $second: not reproducible"
rm -rf "$dist/.first" "$dist/.image.log"

git archive --format=tar.gz --prefix="kvrelay-$version/" -o "$dist/kvrelay-$version.tar.gz" "$commit"

(cd "$dist" && sha256sum -- * > SHA256SUMS)
echo "release.sh: $dist"
cat "$dist/SHA256SUMS"
echo "release.sh: image digest $second (built twice, identical)"
