package testcerts

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/crypto/bcrypt"
)

// Cluster is what WriteCluster wrote: the credentials a client needs.
type Cluster struct {
	Dir          string
	CAFile       string
	AdminToken   string // in admin.token
	WriteToken   string // in write.token
	ReaderUser   string // basic auth user with the read role
	ReaderPass   string // its password (only its bcrypt hash is on disk, in each web config)
	OperatorCert string // operator.crt/.key: for etcd and the placement CLI, refused on the node RPC
	OperatorKey  string
	NodeWebFiles map[string]string // node -> web-<node>.yml
}

// WriteCluster writes a throwaway cluster CA and, into dir, everything the
// secure example (config/examples/secure) reads: ca.crt; <node>.crt and
// <node>.key for each node (a node certificate: URI SAN
// spiffe://tessera/node/<node>, DNS/IP SANs the node name and hosts; for
// RPC, etcd and HTTPS alike); operator.crt/.key for operators (client
// authentication only, no node identity: etcd takes it, the node RPC
// refuses it); web-<node>.yml
// (tls_server_config and one basic auth user, "grafana", with a random
// password); write.token and admin.token. The CA's key is not written:
// the set is for trying things out, and a new node needs a new set.
func WriteCluster(dir string, nodes []string, hosts ...string) (Cluster, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Cluster{}, err
	}
	ca, err := NewCA("tessera throwaway cluster CA")
	if err != nil {
		return Cluster{}, err
	}
	c := Cluster{Dir: dir, ReaderUser: "grafana", NodeWebFiles: map[string]string{}}
	c.ReaderPass, c.AdminToken, c.WriteToken = random(), random(), random()
	hash, err := bcrypt.GenerateFromPassword([]byte(c.ReaderPass), bcrypt.DefaultCost)
	if err != nil {
		return Cluster{}, err
	}
	for _, n := range nodes {
		if _, err := ca.WriteNode(dir, n, append([]string{n}, hosts...)...); err != nil {
			return Cluster{}, err
		}
		web := filepath.Join(dir, "web-"+n+".yml")
		body := fmt.Sprintf("# HTTPS and basic auth users of %s (exporter-toolkit web config format).\n"+
			"# Paths are relative to this file.\ntls_server_config:\n  cert_file: %s.crt\n  key_file: %s.key\n"+
			"basic_auth_users:\n  %s: %s\n", n, n, n, c.ReaderUser, hash)
		if err := os.WriteFile(web, []byte(body), 0o600); err != nil {
			return Cluster{}, err
		}
		c.NodeWebFiles[n] = web
	}
	f, err := ca.WriteOperator(dir, "operator")
	if err != nil {
		return Cluster{}, err
	}
	c.CAFile, c.OperatorCert, c.OperatorKey = f.CA, f.Cert, f.Key
	for name, tok := range map[string]string{"admin.token": c.AdminToken, "write.token": c.WriteToken} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(tok+"\n"), 0o600); err != nil {
			return Cluster{}, err
		}
	}
	return c, nil
}

func random() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
