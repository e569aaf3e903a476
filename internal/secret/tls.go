package secret

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// TLSFiles are the PEM files of a TLS client: the CA that signs the
// server's certificate ("" for the system's roots), and the client's own
// certificate and key ("" for none), with the variables that name them.
type TLSFiles struct {
	CA, Cert, Key          string
	CAVar, CertVar, KeyVar string
}

// Set reports whether any file is named.
func (f TLSFiles) Set() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

// Config builds the TLS client configuration of f, nil when f names no
// file. The client certificate
// is read again when its files change (checked at most once a second, at
// a handshake), so a rotated certificate is used from the next connection
// on. Every error names the variable.
func (f TLSFiles) Config() (*tls.Config, error) {
	if (f.Cert == "") != (f.Key == "") {
		return nil, varErr(f.CertVar, "goes with %s: set both or neither", f.KeyVar)
	}
	if !f.Set() {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, varErr(f.CAVar, "%v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, varErr(f.CAVar, "%s holds no PEM certificate", f.CA)
		}
		c.RootCAs = pool
	}
	if f.Cert != "" {
		kp := &keyPair{files: f}
		if _, err := kp.load(); err != nil {
			return nil, err
		}
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return kp.current() }
	}
	return c, nil
}

// keyPair is a client certificate kept in step with its files.
type keyPair struct {
	files   TLSFiles
	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]time.Time // modification times of the files loaded
	checked time.Time
}

func (k *keyPair) load() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(k.files.Cert, k.files.Key)
	if err != nil {
		return nil, varErr(k.files.CertVar, "with %s: %v", k.files.KeyVar, err)
	}
	k.cert, k.stamp = &cert, k.stamps()
	return k.cert, nil
}

func (k *keyPair) stamps() [2]time.Time {
	var out [2]time.Time
	for i, f := range []string{k.files.Cert, k.files.Key} {
		if st, err := os.Stat(f); err == nil {
			out[i] = st.ModTime()
		}
	}
	return out
}

// current is the certificate to present: the files' when they changed
// and load, else the one loaded before.
func (k *keyPair) current() (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if time.Since(k.checked) < time.Second {
		return k.cert, nil
	}
	k.checked = time.Now()
	if k.stamps() == k.stamp {
		return k.cert, nil
	}
	// Half-written files during a rotation do not load: the pair loaded
	// before stays, and the next handshake tries again.
	_, _ = k.load()
	return k.cert, nil
}

// RefusedStatus reports whether an HTTP status is the answer to a refused
// credential: 401, 403, or 407 from a proxy in front.
func RefusedStatus(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusProxyAuthRequired
}

// TLSRefused reports whether err is a failed TLS handshake: a certificate
// relay does not trust, or a peer refusing relay's (or its lack of one).
func TLSRefused(err error) bool {
	var verify *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var alert tls.AlertError
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &alert) ||
		strings.Contains(err.Error(), "remote error: tls:")
}
