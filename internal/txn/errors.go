package txn

import (
	"errors"
)

// ErrFatal wraps errors after which relay must stop: the caller exits
// non-zero.
var ErrFatal = errors.New("fatal transactional error")

// ErrInstanceFenced comes with ErrFatal when the group coordinator refused
// the consumer's group.instance.id (FENCED_INSTANCE_ID): another member
// holds it, a twin or a stale one (see twin.go). The loop has given up its
// partitions as a revoke would, and left the consumer unclosed; its
// caller decides whether to stop or to rejoin with a new consumer.
var ErrInstanceFenced = errors.New("the group coordinator gave this group.instance.id to another member")
