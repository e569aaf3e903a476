#!/usr/bin/env bash
# make image: relay's container image, built without a container engine
# (deploy/image, on go-containerregistry) from the static binaries of
# scripts/release.sh: dist/oci, an OCI image layout with one index for the
# architectures built and relay's SBOM attached, and
# dist/relay-image-linux-<arch>.tar for `docker load`.
#
# usage: image.sh [amd64] [arm64]   (default: both)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

arches=("$@")
((${#arches[@]})) || arches=(amd64 arm64)
scripts/release.sh "${arches[@]}"
# shellcheck source=scripts/version.sh
. scripts/version.sh

out="$(cd "$OUT" && pwd)"
bins=()
for a in "${arches[@]}"; do
  bins+=(-bin "$a=$out/relay-linux-$a")
done
first="$out/relay-linux-${arches[0]}"
librdkafka="$(run_release "${arches[0]}" "$first" version | sed -n 's/^librdkafka: //p')"
(cd deploy && go run ./image -version "$VERSION" -revision "$COMMIT" -librdkafka "$librdkafka" -out "$out" "${bins[@]}")
