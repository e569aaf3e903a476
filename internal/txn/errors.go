package txn

import (
	"errors"
)

// ErrFatal wraps errors after which relay must stop: the caller exits
// non-zero.
var ErrFatal = errors.New("fatal transactional error")
