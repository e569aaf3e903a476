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
# What is linked into relay, as relay says (librdkafka and the C libraries
# its static build bundles, with their versions), for the SBOM.
run_release "${arches[0]}" "$first" version -o json > "$out/relay-version.json"
(cd deploy && go run ./image -version "$VERSION" -revision "$COMMIT" -linked "$out/relay-version.json" -out "$out" "${bins[@]}")

# Every artefact, with its digest; then the check that they all name
# VERSION and that the SBOM names every C library the librdkafka archive
# links in (nm).
(cd "$out" && sha256sum relay-linux-* relay-image-linux-*.tar "relay-$VERSION.tgz" RELEASE-NOTES.md > SHA256SUMS)
kafka_dir="$(go list -m -f '{{.Dir}}' github.com/confluentinc/confluent-kafka-go/v2)"
archive="$kafka_dir/kafka/librdkafka_vendor/librdkafka_musl_linux_${arches[0]}.a"
(cd deploy && go run ./releasecheck -dist "$out" -version "$VERSION" -archive "$archive")

# Signed, when given a key and where to publish: the image pushed to
# RELAY_RELEASE_REPOSITORY with its signature and SLSA provenance, the
# chart's signature beside it (deploy/sign; verify with cosign --key).
if [[ -n "${RELAY_SIGNING_KEY:-}" ]]; then
  [[ -n "${RELAY_RELEASE_REPOSITORY:-}" ]] || { echo "image.sh: RELAY_SIGNING_KEY needs RELAY_RELEASE_REPOSITORY (HOST/PATH to push the image to)" >&2; exit 2; }
  (cd deploy && go run ./sign -oci "$out/oci" -version "$VERSION" -repository "$RELAY_RELEASE_REPOSITORY" -key "$RELAY_SIGNING_KEY" \
    -chart "$out/relay-$VERSION.tgz" -commit "$COMMIT" -source "${RELAY_SOURCE_URL:-$(git remote get-url origin 2>/dev/null || echo unknown)}")
  (cd "$out" && sha256sum relay-linux-* relay-image-linux-*.tar "relay-$VERSION.tgz" "relay-$VERSION.tgz.sig" RELEASE-NOTES.md > SHA256SUMS)
fi
