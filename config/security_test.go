package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Each bad security setting is refused with its field named.
func TestSecurityValidation(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"http:\n  auth:\n    users: {bob: read}\n", "http.auth.users: basic auth users need"},
		{"http:\n  webConfigFile: w.yml\n  auth:\n    users: {bob: root}\n", `http.auth.users.bob: role "root"`},
		{"http:\n  auth:\n    tokens: [{role: write}]\n", "http.auth.tokens[0].token: set exactly one"},
		{"http:\n  auth:\n    tokens: [{role: write, token: a, tokenFile: f}]\n", "http.auth.tokens[0].token: set exactly one"},
		{"http:\n  auth:\n    tokens: [{role: god, token: a}]\n", `http.auth.tokens[0].role: "god"`},
		{"rpc:\n  tls: {certFile: a, keyFile: b}\n", "rpc.tls: mutual TLS needs certFile, keyFile and caFile"},
		{"etcd:\n  tls: {certFile: a}\n", "etcd.tls: certFile and keyFile go together"},
		{"etcd:\n  password: x\n", "etcd.username: a password needs a username"},
		{"etcd:\n  username: u\n  password: x\n  passwordFile: f\n", "etcd.password: set password or passwordFile"},
		{"etcd:\n  embedded:\n    enabled: true\n    clientTLS: {certFile: a, keyFile: b}\n", "etcd.embedded.clientTLS: is set but the URL \"http://127.0.0.1:2379\" is not https://"},
		{"etcd:\n  embedded:\n    enabled: true\n    peerURL: https://127.0.0.1:2380\n    peerTLS: {caFile: c}\n", "etcd.embedded.peerTLS: TLS needs certFile and keyFile"},
	} {
		_, err := Parse(strings.NewReader(tc.yaml))
		require.ErrorContains(t, err, tc.want, tc.yaml)
	}
	c, err := Parse(strings.NewReader("http:\n  webConfigFile: w.yml\n  auth:\n    users: {bob: read}\n    tokens: [{role: admin, tokenFile: t}]\nrpc:\n  tls: {certFile: a, keyFile: b, caFile: c}\n"))
	require.NoError(t, err)
	require.True(t, c.HTTP.Auth.Enabled())
	require.True(t, c.RPC.TLS.Enabled())
	require.False(t, Default().HTTP.Auth.Enabled(), "auth is off in the embedded default")
}
