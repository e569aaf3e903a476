// Package integration proves relay's guarantees against the real broker the
// project starts (scripts/stack/up.sh): relay runs as a subprocess, is
// killed, fenced, rebalanced and restarted, and every test asserts
// invariants over the whole run — every source record in the output exactly
// once, committed offsets at the source end — rather than a happy path.
//
// One shared broker serves the package; each test uses its own topics, group
// and transactional ids. Without a broker the tests skip, unless
// RELAY_TEST_REQUIRE_BROKER=1 (as in `make test` and CI), where they fail.
package integration
