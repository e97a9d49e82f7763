// Package etcdtest runs a real single-member etcd inside a test process, on
// free loopback ports with its data in t.TempDir(), for tests of anything
// that talks to etcd.
package etcdtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Start runs an embedded etcd until the test ends and returns its client
// endpoints.
func Start(t testing.TB) (endpoints []string) {
	t.Helper()
	return StartServer(t).Endpoints()
}

// Server is an embedded etcd that a test can stop and restart on the same
// ports and data directory, to exercise reconnects.
type Server struct {
	t      testing.TB
	tls    TLS
	dir    string
	client url.URL
	peer   url.URL
	etcd   *embed.Etcd
	// name and cluster are the member's name and the initial cluster
	// (name=peerURL,...); one member alone when empty.
	name, cluster string
}

// TLS serves the client URL over TLS with the key pair, requiring client
// certificates signed by CAFile.
type TLS struct{ CertFile, KeyFile, CAFile string }

// StartServer runs an embedded etcd until the test ends.
func StartServer(t testing.TB) *Server { return StartServerTLS(t, TLS{}) }

// StartServerTLS is StartServer with TLS on the client URL when tls names
// a key pair (plain otherwise).
func StartServerTLS(t testing.TB, tls TLS) *Server {
	t.Helper()
	s := &Server{t: t, dir: t.TempDir(), tls: tls}
	// A port picked here can be taken by someone else before etcd binds
	// it; try a few times.
	var err error
	for range 5 {
		s.client, s.peer = freeURL(t), freeURL(t)
		if tls.CertFile != "" {
			s.client.Scheme = "https"
		}
		if err = s.start(); err == nil {
			t.Cleanup(s.Stop)
			return s
		}
	}
	t.Fatalf("start embedded etcd: %v", err)
	return nil
}

// Endpoints returns the client endpoints (host:port).
func (s *Server) Endpoints() []string { return []string{s.client.Host} }

// Stop shuts the server down; it is safe to call more than once.
func (s *Server) Stop() {
	if s.etcd == nil {
		return
	}
	s.etcd.Close()
	<-s.etcd.Server.StopNotify()
	s.etcd = nil
}

// Restart stops the server and starts it again on the same ports and data.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	var err error
	for range 50 { // the old listeners may take a moment to release the ports
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("restart embedded etcd: %v", err)
}

func (s *Server) start() error {
	cfg := embed.NewConfig()
	cfg.Name = "etcdtest"
	if s.name != "" {
		cfg.Name = s.name
	}
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{s.client}
	cfg.AdvertiseClientUrls = []url.URL{s.client}
	cfg.ListenPeerUrls = []url.URL{s.peer}
	cfg.AdvertisePeerUrls = []url.URL{s.peer}
	cfg.InitialCluster = fmt.Sprintf("%s=%s", cfg.Name, s.peer.String())
	if s.cluster != "" {
		cfg.InitialCluster = s.cluster
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.LogLevel = "error"
	if s.tls.CertFile != "" {
		cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile = s.tls.CertFile, s.tls.KeyFile
		cfg.ClientTLSInfo.TrustedCAFile, cfg.ClientTLSInfo.ClientCertAuth = s.tls.CAFile, s.tls.CAFile != ""
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	select {
	case <-e.Server.ReadyNotify():
		s.etcd = e
		return nil
	case <-time.After(30 * time.Second):
		e.Close()
		return fmt.Errorf("embedded etcd not ready after 30s")
	}
}

// StartCluster runs n embedded members forming one etcd cluster until the
// test ends (members named m0, m1, ...). Each can be stopped alone, to
// take quorum away.
func StartCluster(t testing.TB, n int) []*Server {
	t.Helper()
	servers := make([]*Server, n)
	var peers []string
	for i := range servers {
		s := &Server{t: t, dir: t.TempDir(), name: fmt.Sprintf("m%d", i), client: freeURL(t), peer: freeURL(t)}
		servers[i] = s
		peers = append(peers, s.name+"="+s.peer.String())
	}
	errs := make(chan error, n)
	for _, s := range servers {
		s.cluster = strings.Join(peers, ",")
		go func() { errs <- s.start() }() // members wait for each other
	}
	for range servers {
		if err := <-errs; err != nil {
			for _, s := range servers {
				s.Stop()
			}
			t.Fatalf("start embedded etcd cluster: %v", err)
		}
	}
	for _, s := range servers {
		t.Cleanup(s.Stop)
	}
	return servers
}

func freeURL(t testing.TB) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}

// EnableAuth turns etcd's authentication on through client: a root user
// with password, granted the root role. Later clients need the password.
func EnableAuth(t testing.TB, client *clientv3.Client, password string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, step := range []func() error{
		func() error { _, err := client.UserAdd(ctx, "root", password); return err },
		func() error { _, err := client.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := client.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("enable etcd auth: %v", err)
		}
	}
}
