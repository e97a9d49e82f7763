// Package testcerts makes throwaway certificate authorities and leaf
// certificates for tests and examples, so no private key is ever
// committed: every run generates its own (ECDSA P-256, valid for a day
// unless asked otherwise).
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a self-signed certificate authority that can sign leaves.
type CA struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
}

// Validity is how long generated certificates are valid from an hour ago.
var Validity = 24 * time.Hour

// NewCA makes a CA with the given common name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ca key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(Validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("ca cert: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: pemBlock("CERTIFICATE", der)}, nil
}

// Leaf is a signed certificate and its key, PEM encoded.
type Leaf struct {
	CertPEM, KeyPEM []byte
}

// Issue signs a certificate for name, usable as both a TLS server and a
// TLS client certificate (nodes are both to each other). hosts are its
// SANs: IP addresses become IP SANs, anything else a DNS SAN.
func (ca *CA) Issue(name string, hosts ...string) (Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Leaf{}, fmt.Errorf("leaf key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return Leaf{}, fmt.Errorf("sign %s: %w", name, err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Leaf{}, err
	}
	return Leaf{CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: pemBlock("EC PRIVATE KEY", kder)}, nil
}

// Files are the paths WriteFiles wrote.
type Files struct{ Cert, Key, CA string }

// WriteCA writes the CA certificate (not its key) to dir/ca.crt.
func (ca *CA) WriteCA(dir string) (string, error) {
	p := filepath.Join(dir, "ca.crt")
	return p, os.WriteFile(p, ca.CertPEM, 0o644)
}

// WriteLeaf issues a leaf for name and writes dir/<name>.crt, dir/<name>.key
// and dir/ca.crt.
func (ca *CA) WriteLeaf(dir, name string, hosts ...string) (Files, error) {
	l, err := ca.Issue(name, hosts...)
	if err != nil {
		return Files{}, err
	}
	f := Files{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key")}
	if err := os.WriteFile(f.Cert, l.CertPEM, 0o644); err != nil {
		return Files{}, err
	}
	if err := os.WriteFile(f.Key, l.KeyPEM, 0o600); err != nil {
		return Files{}, err
	}
	if f.CA, err = ca.WriteCA(dir); err != nil {
		return Files{}, err
	}
	return f, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
