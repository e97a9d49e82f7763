// Package tlsfiles builds crypto/tls configurations from PEM files named in
// the config (certificate, key, certificate authority) for the node RPC and
// the etcd client. The key pair is re-read when either file changes (checked
// at each handshake, at most once a second), so rotating certificates needs
// no restart; the CA is read once.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Files names the PEM files. CertFile and KeyFile go together.
type Files struct {
	CertFile, KeyFile, CAFile string
	// ServerName overrides the name a client verifies the server's
	// certificate against (default: the host it dials).
	ServerName string
}

// Enabled reports whether any file is named.
func (f Files) Enabled() bool { return f.CertFile != "" || f.KeyFile != "" || f.CAFile != "" }

// ServerMutual is the server side of mutual TLS: it presents the key pair
// and refuses any client without a certificate signed by the CA.
func ServerMutual(f Files) (*tls.Config, error) {
	if f.CertFile == "" || f.KeyFile == "" || f.CAFile == "" {
		return nil, errors.New("mutual TLS needs certFile, keyFile and caFile")
	}
	pool, err := loadCA(f.CAFile)
	if err != nil {
		return nil, err
	}
	kp, err := newKeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs:  pool,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return kp.get()
		},
	}, nil
}

// Client is the client side: it verifies the server against the CA (the
// system roots when CAFile is empty) and presents the key pair, if any.
func Client(f Files) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CAFile != "" {
		pool, err := loadCA(f.CAFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, errors.New("certFile and keyFile go together")
	}
	if f.CertFile != "" {
		kp, err := newKeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, err
		}
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return kp.get()
		}
	}
	return c, nil
}

func loadCA(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("CA %s: no PEM certificate in it", path)
	}
	return pool, nil
}

// recheckEvery bounds how often a key pair's files are looked at (a stat
// of each per handshake otherwise).
var recheckEvery = time.Second

// keyPair is a certificate and key re-read when either file changes.
type keyPair struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string // mtimes and sizes of both files when cert was read
	checked time.Time
}

func newKeyPair(certFile, keyFile string) (*keyPair, error) {
	k := &keyPair{certFile: certFile, keyFile: keyFile}
	if _, err := k.get(); err != nil {
		return nil, err
	}
	return k, nil
}

// get returns the current pair. A change on disk that does not load (a
// half-written rotation) keeps the last good pair and is tried again a
// second later.
func (k *keyPair) get() (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	if k.cert != nil && now.Sub(k.checked) < recheckEvery {
		return k.cert, nil
	}
	k.checked = now
	stamp := fileStamp(k.certFile) + "|" + fileStamp(k.keyFile)
	if k.cert != nil && stamp == k.stamp {
		return k.cert, nil
	}
	c, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		if k.cert != nil {
			return k.cert, nil
		}
		return nil, fmt.Errorf("load key pair %s, %s: %w", k.certFile, k.keyFile, err)
	}
	k.cert, k.stamp = &c, stamp
	return k.cert, nil
}

func fileStamp(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return "missing"
	}
	return fmt.Sprintf("%d/%d", st.ModTime().UnixNano(), st.Size())
}
