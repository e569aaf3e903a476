#!/usr/bin/env bash
# Prepares release VERSION in the working tree: CHANGELOG.md's [Unreleased]
# becomes ## [VERSION] - today (with a new, empty [Unreleased] above it),
# and the chart's version and appVersion become VERSION. Then: review,
# commit, tag (git tag -a vVERSION -m "relay VERSION"), and build it with
# `make release` (the tag on the commit gives the version), or
# `make release VERSION=VERSION`.
#
# usage: cut-release.sh VERSION   (x.y.z)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

version="${1:-}"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "usage: cut-release.sh x.y.z (got '${version}')" >&2; exit 2; }
if grep -q "^## \[$version\]" CHANGELOG.md; then
  echo "cut-release.sh: CHANGELOG.md already has ## [$version]" >&2
  exit 2
fi
grep -q '^## \[Unreleased\]' CHANGELOG.md || { echo "cut-release.sh: CHANGELOG.md has no ## [Unreleased] section to release" >&2; exit 2; }
today="$(date -u +%Y-%m-%d)"
tmp="$(mktemp)"
awk -v v="$version" -v d="$today" '
  !done && /^## \[Unreleased\]/ { print; print ""; print "## [" v "] - " d; done = 1; next }
  { print }' CHANGELOG.md > "$tmp"
mv "$tmp" CHANGELOG.md
sed -i -E "s/^version: .*/version: $version/; s/^appVersion: .*/appVersion: \"$version\"/" deploy/helm/relay/Chart.yaml
echo "cut-release.sh: CHANGELOG.md's [Unreleased] is now [$version] - $today; the chart is at $version. Review, commit, tag v$version, then make release."
