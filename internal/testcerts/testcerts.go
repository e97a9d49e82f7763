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
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/tessera-tsdb/tessera/internal/nodeident"
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
// TLS client certificate, with no node identity: what an HTTPS server or
// a generic client holds. hosts are its SANs: IP addresses become IP
// SANs, anything else a DNS SAN.
func (ca *CA) Issue(name string, hosts ...string) (Leaf, error) {
	return ca.issue(name, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, hosts)
}

// IssueNode signs a node certificate for node id: server and client
// (nodes are both to each other), with the node URI SAN the node RPC
// requires (internal/nodeident) besides hosts.
func (ca *CA) IssueNode(id string, hosts ...string) (Leaf, error) {
	return ca.issue(id, []*url.URL{nodeident.URI(id)}, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, hosts)
}

// OperatorURIPrefix starts an operator certificate's URI SAN (a name for
// audit logs; nothing grants rights by it).
const OperatorURIPrefix = "spiffe://tessera/operator/"

// IssueOperator signs an operator's client certificate: client
// authentication only (it cannot serve), no node identity, so the node
// RPC refuses it while etcd (client certificates from the CA) takes it.
func (ca *CA) IssueOperator(name string) (Leaf, error) {
	u, err := url.Parse(OperatorURIPrefix + name)
	if err != nil {
		return Leaf{}, fmt.Errorf("operator name %q: %w", name, err)
	}
	return ca.issue(name, []*url.URL{u}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil)
}

func (ca *CA) issue(name string, uris []*url.URL, eku []x509.ExtKeyUsage, hosts []string) (Leaf, error) {
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
		ExtKeyUsage:  eku,
		URIs:         uris,
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

// WriteLeaf issues a leaf for name (Issue: no node identity) and writes
// dir/<name>.crt, dir/<name>.key and dir/ca.crt.
func (ca *CA) WriteLeaf(dir, name string, hosts ...string) (Files, error) {
	l, err := ca.Issue(name, hosts...)
	if err != nil {
		return Files{}, err
	}
	return ca.write(dir, name, l)
}

// WriteNode issues a node certificate for id (IssueNode) and writes
// dir/<id>.crt, dir/<id>.key and dir/ca.crt.
func (ca *CA) WriteNode(dir, id string, hosts ...string) (Files, error) {
	l, err := ca.IssueNode(id, hosts...)
	if err != nil {
		return Files{}, err
	}
	return ca.write(dir, id, l)
}

// WriteOperator issues an operator certificate (IssueOperator) and writes
// dir/<name>.crt, dir/<name>.key and dir/ca.crt.
func (ca *CA) WriteOperator(dir, name string) (Files, error) {
	l, err := ca.IssueOperator(name)
	if err != nil {
		return Files{}, err
	}
	return ca.write(dir, name, l)
}

func (ca *CA) write(dir, name string, l Leaf) (Files, error) {
	var err error
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
