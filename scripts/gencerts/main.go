// Command gencerts writes a throwaway CA, node certificates, web configs
// and tokens for the secure example (config/examples/secure) and the
// secure docker compose variant. Not for production: use your own PKI.
//
//	go run ./scripts/gencerts -dir ./secure   # the loopback example and docker-compose.secure.yml alike
//
// Three kinds of certificate, all from one throwaway CA:
//   - node certificates, <node>.crt: server and client authentication,
//     the URI SAN spiffe://tessera/node/<node> (what the node RPC requires
//     of both ends), DNS SANs the node's name (node1..node3: the compose
//     service names) and -hosts; the node's RPC, HTTPS, embedded etcd
//     member and etcd client;
//   - the operator certificate, operator.crt: client authentication only,
//     URI SAN spiffe://tessera/operator/operator, no node identity: etcd
//     (and so the placement) takes it, the node RPC refuses it;
//   - the CA certificate, ca.crt, for every client.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tessera-tsdb/tessera/internal/testcerts"
)

func main() {
	dir := flag.String("dir", "./secure", "directory to write into")
	nodes := flag.String("nodes", "node1,node2,node3", "node names: one certificate and web config each")
	hosts := flag.String("hosts", "127.0.0.1,localhost", "extra SANs on every certificate (IPs or DNS names)")
	valid := flag.Duration("valid", 30*24*time.Hour, "how long the certificates are valid")
	flag.Parse()
	testcerts.Validity = *valid
	c, err := testcerts.WriteCluster(*dir, strings.Split(*nodes, ","), strings.Split(*hosts, ",")...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gencerts:", err)
		os.Exit(1)
	}
	fmt.Printf(`wrote a throwaway CA and certificates to %s (valid for %v; the CA key is not kept)

read role (basic auth):     %s / %s
write role (bearer):        $(cat %s/write.token)
admin role (bearer):        $(cat %s/admin.token)
CA for clients:             %s
operator (etcd, placement): --ca-file %s --cert-file %s --key-file %s
`, c.Dir, *valid, c.ReaderUser, c.ReaderPass, c.Dir, c.Dir, c.CAFile, c.CAFile, c.OperatorCert, c.OperatorKey)
}
