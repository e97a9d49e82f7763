package node

import (
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/tessera-tsdb/tessera/config"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// startEmbeddedEtcd runs this seed's etcd member. Seeds listed in
// initialCluster form one etcd cluster; the member's data lives under the
// node's data directory so a restarted seed rejoins with its state.
//
// free reports a directory's free bytes (freeBytes in production): the
// member does not start without the space etcd needs (checkEtcdDisk).
func startEmbeddedEtcd(cfg config.Config, free func(string) (uint64, error), log *slog.Logger) (_ *embed.Etcd, err error) {
	e := cfg.Etcd.Embedded
	ec := embed.NewConfig()
	ec.Name = e.Name
	ec.Dir = filepath.Join(cfg.DataDir, "etcd")
	if err := checkEtcdDisk(ec.Dir, free); err != nil {
		return nil, err
	}
	cu, err := url.Parse(e.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("etcd.embedded.clientURL: %w", err)
	}
	pu, err := url.Parse(e.PeerURL)
	if err != nil {
		return nil, fmt.Errorf("etcd.embedded.peerURL: %w", err)
	}
	ec.ListenClientUrls = []url.URL{*cu}
	ec.AdvertiseClientUrls = []url.URL{*cu}
	ec.ListenPeerUrls = []url.URL{*pu}
	ec.AdvertisePeerUrls = []url.URL{*pu}
	if e.ListenClientURL != "" {
		lu, err := url.Parse(e.ListenClientURL)
		if err != nil {
			return nil, fmt.Errorf("etcd.embedded.listenClientURL: %w", err)
		}
		ec.ListenClientUrls = []url.URL{*lu}
	}
	if e.ListenPeerURL != "" {
		lu, err := url.Parse(e.ListenPeerURL)
		if err != nil {
			return nil, fmt.Errorf("etcd.embedded.listenPeerURL: %w", err)
		}
		ec.ListenPeerUrls = []url.URL{*lu}
	}
	embeddedTLS(&ec.ClientTLSInfo, e.ClientTLS)
	embeddedTLS(&ec.PeerTLSInfo, e.PeerTLS)
	ec.InitialCluster = e.InitialCluster
	ec.InitialClusterToken = "tessera-" + cfg.Cluster.Name
	ec.ClusterState = embed.ClusterStateFlagNew
	if e.InitialClusterState == "existing" {
		ec.ClusterState = embed.ClusterStateFlagExisting // joins after `tessera etcd add-member`
	}
	// One log format: etcd's zap logs go through the node's logger, its
	// routine chatter demoted (zap.go).
	ec.Logger = "zap"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(etcdServerLogger(log))
	etcd, err := startEtcdRecovered(ec)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd %s: %w", e.Name, err)
	}
	// A lone member is ready at once; a seed of several waits for a quorum
	// of seeds, which the caller tolerates (the node serves from its cached
	// placement meanwhile), so do not block forever here.
	if len(strings.Split(e.InitialCluster, ",")) == 1 {
		select {
		case <-etcd.Server.ReadyNotify():
		case <-time.After(60 * time.Second):
			etcd.Close()
			return nil, fmt.Errorf("embedded etcd %s did not become ready in 60s", e.Name)
		}
	}
	return etcd, nil
}

// startEtcdRecovered is embed.StartEtcd with a panic on its own goroutine
// (etcd panics on some disk failures at start, such as a full disk that
// the check above could not foresee) turned into an error naming the
// directory, so the node exits with a message instead of a stack trace.
func startEtcdRecovered(ec *embed.Config) (etcd *embed.Etcd, err error) {
	defer func() {
		if r := recover(); r != nil {
			etcd, err = nil, fmt.Errorf("embedded etcd in %s failed: %v", ec.Dir, r)
		}
	}()
	return embed.StartEtcd(ec)
}

// embeddedTLS fills one side of the member's TLS: its key pair, and with a
// CA, client certificates required and verified against it.
func embeddedTLS(info *transport.TLSInfo, f config.TLSFiles) {
	if !f.Enabled() {
		return
	}
	info.CertFile, info.KeyFile = f.CertFile, f.KeyFile
	if f.CAFile != "" {
		info.TrustedCAFile = f.CAFile
		info.ClientCertAuth = true
	}
}
