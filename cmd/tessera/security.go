package main

import (
	"os"

	"github.com/spf13/pflag"
	"github.com/tessera-tsdb/tessera/internal/clientsec"
)

// securityFlags registers the credential and TLS flags every command that
// talks to a node's HTTP API takes (bench, repair status). The secrets'
// defaults come from the environment in s.CredentialsFromEnv, at run time,
// so `--help` never prints them.
func securityFlags(f *pflag.FlagSet, s *clientsec.Security) {
	f.StringVar(&s.BearerToken, "bearer-token", "", "send Authorization: Bearer <token>; prefer $"+clientsec.EnvBearerToken+", the default")
	f.StringVar(&s.BasicAuth, "basic-auth", "", "user:password for basic auth; prefer $"+clientsec.EnvBasicAuth+", the default")
	f.StringVar(&s.CAFile, "ca-file", os.Getenv(clientsec.EnvCAFile), "CA certificate (PEM) that verifies an https:// node [$"+clientsec.EnvCAFile+"]")
	f.StringVar(&s.CertFile, "cert-file", os.Getenv(clientsec.EnvCertFile), "client certificate (PEM), for a node that requires one [$"+clientsec.EnvCertFile+"]")
	f.StringVar(&s.KeyFile, "key-file", os.Getenv(clientsec.EnvKeyFile), "key of --cert-file [$"+clientsec.EnvKeyFile+"]")
}
