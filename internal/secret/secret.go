// Package secret holds relay's secrets: a password, a token, a signing key.
// Each comes from its variable or from the file its _FILE form names (the
// Kubernetes and Docker convention for mounted secrets). A secret from a
// file is read again when the file changes — a mounted Secret rotates by
// a symlink swap — and on SIGHUP; whoever uses it asks for the current
// value at each use, so a rotation needs no restart.
package secret

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

// FileSuffix turns a secret variable's name into the name of its file form.
const FileSuffix = "_FILE"

// VarError is a problem with the variable Var (or the file it names).
type VarError struct {
	Var, Problem string
}

func (e *VarError) Error() string { return e.Var + ": " + e.Problem }

func varErr(name, format string, args ...any) error {
	return &VarError{Var: name, Problem: fmt.Sprintf(format, args...)}
}

// Value is one secret: its current value, and where it comes from.
type Value struct {
	// Var is the variable that set it: NAME, or NAME_FILE.
	Var string
	// File is the file it is read from; "" when it came from a variable.
	File string

	cur atomic.Pointer[string]
	mu  sync.Mutex // serialises Reload
	sum [sha256.Size]byte
	// check, when set (Require), refuses a value read again: the value
	// in use stays.
	check func(string) error
}

// Require checks v's value with check now and at every Reload: a value
// read again that fails it is refused, and the one in use stays. It
// returns the current value's error (nil v: nil).
func (v *Value) Require(check func(string) error) error {
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.check = check
	return check(*v.cur.Load())
}

// Fixed is a secret given in a variable: it never changes.
func Fixed(name, value string) *Value {
	v := &Value{Var: name}
	v.cur.Store(&value)
	return v
}

// FromFile reads a secret from file, set by the variable name (NAME_FILE).
// Trailing newlines are not part of the secret (editors and `echo` add
// one); other white space is.
func FromFile(name, file string) (*Value, error) {
	v := &Value{Var: name, File: file}
	if _, err := v.Reload(); err != nil {
		return nil, err
	}
	return v, nil
}

// VarName is the variable that set v, name when v is nil.
func (v *Value) VarName(name string) string {
	if v == nil {
		return name
	}
	return v.Var
}

// Get is the current value. A nil Value is the empty secret.
func (v *Value) Get() string {
	if v == nil {
		return ""
	}
	return *v.cur.Load()
}

// Reload reads the file again and reports whether the value changed. A
// secret from a variable never changes. When the file cannot be read, or
// holds nothing, the value in use is kept and the error says why.
func (v *Value) Reload() (changed bool, err error) {
	if v == nil || v.File == "" {
		return false, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	b, err := os.ReadFile(v.File)
	if err != nil {
		return false, varErr(v.Var, "cannot read the secret: %v", err)
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(b) == 0 {
		return false, varErr(v.Var, "%s is empty", v.File)
	}
	sum := sha256.Sum256(b)
	if v.cur.Load() != nil && sum == v.sum {
		return false, nil
	}
	s := string(b)
	if v.check != nil {
		if err := v.check(s); err != nil {
			return false, varErr(v.Var, "%s: %v; the value read before stays in use", v.File, err)
		}
	}
	v.cur.Store(&s)
	v.sum = sum
	return true, nil
}

// Lookup reads the secret variable name from lookup: from name, or from
// the file name_FILE names. Setting both is an error naming them. ok is
// false when neither is set.
func Lookup(lookup func(string) (string, bool), name string) (v *Value, ok bool, err error) {
	val, inVar := lookup(name)
	file, inFile := lookup(name + FileSuffix)
	file = strings.TrimSpace(file)
	switch {
	case inVar && inFile:
		return nil, true, varErr(name, "set together with %s: set one of them", name+FileSuffix)
	case inFile && file == "":
		return nil, true, varErr(name+FileSuffix, "names no file")
	case inFile:
		v, err := FromFile(name+FileSuffix, file)
		return v, true, err
	case inVar:
		// As every variable of relay's: white space around it is not
		// part of it.
		return Fixed(name, strings.TrimSpace(val)), true, nil
	}
	return nil, false, nil
}

// MaskURL masks what a URL may carry of a secret: the password of its user
// info, and every value of its query string (hooks and registries take API
// keys there: ?code=…, ?api_key=…). A URL that does not parse is masked
// whole.
func MaskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "****"
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "****")
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"****"}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}
