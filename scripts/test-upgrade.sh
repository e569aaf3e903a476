#!/usr/bin/env bash
# make test-upgrade: builds the previous release of relay (scripts/previous-release:
# its version and commit) from this repository's history into .cache/previous, and
# runs the integration tests named TestUpgrade* with both versions in one group.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
read -r version commit < <(grep -v '^#' scripts/previous-release)
dir="$root/.cache/previous/$commit"
bin="$dir/relay"
if [[ ! -x "$bin" ]]; then
  if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
    echo "test-upgrade: commit $commit (relay $version) is not in this clone's history; fetch it (git fetch --unshallow)" >&2
    exit 1
  fi
  rm -rf "$dir/src"
  mkdir -p "$dir"
  git worktree prune
  git worktree add --detach "$dir/src" "$commit" >/dev/null
  echo "test-upgrade: building relay $version ($commit)" >&2
  (cd "$dir/src" && go build -o "$bin" ./cmd/relay)
  git worktree remove --force "$dir/src"
fi
echo "test-upgrade: relay $version at $bin beside this tree's" >&2
RELAY_TEST_PREVIOUS_BIN="$bin" RELAY_TEST_PREVIOUS_VERSION="$version" RELAY_TEST_REQUIRE_BROKER=1 \
  go test -count=1 -timeout 20m -run '^TestUpgrade' ./integration/
