// Package nodeident says which certificates are Tessera nodes'. A node
// certificate carries the URI SAN spiffe://tessera/node/<id> (the SPIFFE
// ID form, so a SPIFFE-aware PKI can issue it); operator and other client
// certificates signed by the same CA do not. The node RPC requires it of
// both ends on every connection: a certificate the cluster CA signed for
// `tessera placement` (etcd) or for a Prometheus (HTTPS) is not a node
// and gets nothing on the node RPC, which writes, overwrites and reads
// every series with no role check.
package nodeident

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// Prefix starts every node's URI SAN; the node ID follows.
const Prefix = "spiffe://tessera/node/"

// URI is the SAN a node certificate for id carries.
func URI(id string) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: "tessera", Path: "/node/" + id}
}

// ID is the node ID a certificate names, if it is a node certificate.
func ID(c *x509.Certificate) (string, bool) {
	for _, u := range c.URIs {
		if s := u.String(); strings.HasPrefix(s, Prefix) && len(s) > len(Prefix) {
			return strings.TrimPrefix(s, Prefix), true
		}
	}
	return "", false
}

// Side is which end of a connection a tls.Config is for.
type Side int

const (
	// ServerSide checks the client's certificate.
	ServerSide Side = iota
	// ClientSide checks the server's certificate.
	ClientSide
)

// Require makes c (a mutual TLS config with the cluster CA, from
// internal/tlsfiles) accept, on every connection, only a peer whose
// certificate is a node's. The check runs after the chain was verified
// against the CA, so it only narrows what the CA signed. c is changed and
// returned.
func Require(c *tls.Config, side Side) *tls.Config {
	peer := "client"
	if side == ClientSide {
		peer = "server"
	}
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("node RPC: the %s presented no certificate", peer)
		}
		leaf := cs.PeerCertificates[0]
		if _, ok := ID(leaf); !ok {
			return fmt.Errorf("node RPC: the %s's certificate (CN %q) is not a node certificate: no URI SAN %s<id>", peer, leaf.Subject.CommonName, Prefix)
		}
		return nil
	}
	return c
}

// CheckOwn reads a node's own certificate file and reports an error
// unless it is a node certificate, so a node given an operator or a
// plain certificate says so at start instead of at every peer's refusal.
func CheckOwn(certFile string) (string, error) {
	b, err := os.ReadFile(certFile)
	if err != nil {
		return "", fmt.Errorf("read certificate: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return "", fmt.Errorf("certificate %s: no PEM certificate in it", certFile)
	}
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return "", fmt.Errorf("certificate %s: %w", certFile, err)
	}
	id, ok := ID(leaf)
	if !ok {
		return "", fmt.Errorf("certificate %s (CN %q) is not a node certificate: it carries no URI SAN %s<id>; issue node certificates with scripts/gencerts (docs/security.md)",
			certFile, leaf.Subject.CommonName, Prefix)
	}
	return id, nil
}
