#!/usr/bin/env bash
# relay as static, stripped, reproducible Linux binaries, for amd64 and
# arm64, its Helm chart at the same version (deploy/chartpkg) and its
# release notes (CHANGELOG.md's section), in dist/ with their SHA256SUMS.
# scripts/image.sh (make image, make release) runs it first.
#
# Static: librdkafka is the musl build that confluent-kafka-go bundles
# (-tags musl), linked with Debian's musl-gcc (amd64) or the aarch64 cross
# compiler with the arm64 musl (arm64); Go's own resolver and user lookup
# (netgo, osusergo). The binary needs no libc, so it runs in an image with
# nothing else in it.
# Reproducible: -trimpath, no build id (Go's nor the linker's), and the
# date stamped in is the commit's (SOURCE_DATE_EPOCH), so one commit
# builds to the same bytes; the script builds the first architecture twice
# and compares.
# Checked: each binary runs `relay version`, arm64 under qemu-user.
#
# usage: release.sh [amd64] [arm64]   (default: both)
# env:   VERSION, COMMIT, SOURCE_DATE_EPOCH (default: from git), OUT (dist)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

arches=("$@")
((${#arches[@]})) || arches=(amd64 arm64)
for a in "${arches[@]}"; do
  [[ "$a" == amd64 || "$a" == arm64 ]] || { echo "release.sh: unknown architecture $a (amd64, arm64)" >&2; exit 2; }
done
scripts/install.sh release "${arches[@]}"

# shellcheck source=scripts/version.sh
. scripts/version.sh
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

say() { printf '[release.sh] %s\n' "$*"; }

# The release notes: CHANGELOG.md's section of VERSION; a pre-release
# (0.7.0-dev.g…) has the unreleased changes. A release without its own
# section in the CHANGELOG, or whose chart says another version, is not
# cut: scripts/cut-release.sh prepares both.
section="$VERSION"
if [[ "$VERSION" == *-* ]]; then
  section=Unreleased
elif ! grep -q "^## \[$VERSION\]" CHANGELOG.md; then
  echo "release.sh: CHANGELOG.md has no section ## [$VERSION]: run scripts/cut-release.sh $VERSION (it moves [Unreleased] there and sets the chart's version), commit, then release" >&2
  exit 2
elif ! grep -qx "version: $VERSION" deploy/helm/relay/Chart.yaml; then
  echo "release.sh: deploy/helm/relay/Chart.yaml is not at version $VERSION: run scripts/cut-release.sh $VERSION" >&2
  exit 2
fi
{
  if [[ "$section" == Unreleased ]]; then
    echo "# relay $VERSION (a pre-release: the changes since the last release)"
  else
    echo "# relay $VERSION"
  fi
  awk -v h="## [$section]" 'index($0, h) == 1 { on = 1; next } on && /^## \[/ { exit } on' CHANGELOG.md
} > "$OUT/RELEASE-NOTES.md"
say "release notes: $OUT/RELEASE-NOTES.md ($(wc -l < "$OUT/RELEASE-NOTES.md") lines, from CHANGELOG.md's [$section])"

# build ARCH FILE: one static binary.
build() {
  local arch="$1" file="$2" cc
  case "$arch" in
    amd64) cc="musl-gcc" ;;
    arm64) cc="aarch64-linux-gnu-gcc -specs /usr/lib/aarch64-linux-musl/musl-gcc.specs" ;;
  esac
  local pkg=relay/internal/buildinfo
  CGO_ENABLED=1 GOOS=linux GOARCH="$arch" CC="$cc" go build \
    -tags musl,netgo,osusergo -trimpath \
    -ldflags "-s -w -buildid= -X $pkg.Version=$VERSION -X $pkg.Commit=$COMMIT -X $pkg.Date=$DATE \
      -linkmode external -extldflags '-static -Wl,--build-id=none'" \
    -o "$file" ./cmd/relay
}

for arch in "${arches[@]}"; do
  bin="$OUT/relay-linux-$arch"
  say "building $bin ($VERSION, $DATE)"
  build "$arch" "$bin"
  if readelf -l "$bin" | grep -q INTERP; then
    echo "release.sh: $bin is not statically linked (it names a program interpreter)" >&2
    exit 1
  fi
  out="$(run_release "$arch" "$bin" version)"
  grep -qx "relay $VERSION" <<<"$out" && grep -qx "date: $DATE" <<<"$out" || {
    echo "release.sh: $bin version says:" >&2
    echo "$out" >&2
    exit 1
  }
  say "$bin runs: $(tr '\n' ' ' <<<"$out")"
done

# The same commit, the same bytes.
first="${arches[0]}"
again="$(mktemp -d)"
trap 'rm -rf "$again"' EXIT
build "$first" "$again/relay"
if ! cmp -s "$again/relay" "$OUT/relay-linux-$first"; then
  echo "release.sh: two builds of relay-linux-$first differ: the build is not reproducible" >&2
  exit 1
fi
say "relay-linux-$first builds to the same bytes twice"

# The chart, at the same version (its appVersion names the image tag).
chart="$(cd deploy && go run ./chartpkg -version "$VERSION" -out "$OUT")"
say "chart: $OUT/$(basename "$chart")"

(cd "$OUT" && sha256sum relay-linux-* "$(basename "$chart")" RELEASE-NOTES.md > SHA256SUMS)
say "$OUT/SHA256SUMS:"
sed 's/^/  /' "$OUT/SHA256SUMS"
