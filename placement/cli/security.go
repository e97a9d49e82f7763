package cli

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tessera-tsdb/tessera/internal/tlsfiles"
)

// etcdSecurity are the flags that reach a secured etcd: TLS files and
// etcd's own user and password. Each defaults to an environment variable,
// so a password need not appear in the command line (and `ps`).
type etcdSecurity struct {
	caFile, certFile, keyFile string
	username, password        string
}

func (s *etcdSecurity) addFlags(f *pflag.FlagSet) {
	f.StringVar(&s.caFile, "ca-file", os.Getenv("TESSERA_ETCD_CA"), "CA certificate (PEM) that verifies etcd's servers; turns on TLS [$TESSERA_ETCD_CA]")
	f.StringVar(&s.certFile, "cert-file", os.Getenv("TESSERA_ETCD_CERT"), "client certificate (PEM) for an etcd that requires one [$TESSERA_ETCD_CERT]")
	f.StringVar(&s.keyFile, "key-file", os.Getenv("TESSERA_ETCD_KEY"), "key of --cert-file [$TESSERA_ETCD_KEY]")
	f.StringVar(&s.username, "username", os.Getenv("TESSERA_ETCD_USERNAME"), "etcd user, when etcd auth is on [$TESSERA_ETCD_USERNAME]")
	f.StringVar(&s.password, "password", "", "etcd password; prefer $TESSERA_ETCD_PASSWORD, which is the default")
}

// apply adds TLS and credentials to the etcd client config.
func (s *etcdSecurity) apply(c *clientv3.Config) error {
	if s.password == "" {
		s.password = os.Getenv("TESSERA_ETCD_PASSWORD")
	}
	files := tlsfiles.Files{CAFile: s.caFile, CertFile: s.certFile, KeyFile: s.keyFile}
	if files.Enabled() {
		tc, err := tlsfiles.Client(files)
		if err != nil {
			return fmt.Errorf("etcd TLS (--ca-file, --cert-file, --key-file): %w", err)
		}
		c.TLS = tc
	}
	if s.password != "" && s.username == "" {
		return fmt.Errorf("--password needs --username")
	}
	c.Username, c.Password = s.username, s.password
	return nil
}
