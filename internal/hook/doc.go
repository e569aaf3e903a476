// Package hook calls the optional HTTP hook for business logic in
// any language, and maps its answer to an outcome. Each call is bounded by a
// timeout and carries a stable Idempotency-Key, so a hook that sees the same
// record twice (after an abort, a retry or a replay) can do its effect once.
package hook
