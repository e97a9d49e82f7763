package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Why the CLI could not talk to etcd decides what the operator does next,
// so the three common causes get their own words instead of one
// "unreachable": nothing answers at the address (start etcd, fix
// --endpoints), it answers but in another TLS mode than the CLI's (pass
// or drop --ca-file, add a client certificate), or it answers but the
// cluster has no quorum (bring etcd members back: docs/etcd.md).

// diagnoseConnect probes each endpoint once the gRPC connection did not
// become ready, and says what it found. tc is the CLI's TLS config, nil
// for plain connections.
func diagnoseConnect(endpoints []string, tc *tls.Config, timeout time.Duration) error {
	at := strings.Join(endpoints, ",")
	var found []string
	for _, ep := range endpoints {
		host := endpointHost(ep)
		conn, err := net.DialTimeout("tcp", host, timeout)
		if err != nil {
			found = append(found, fmt.Sprintf("%s: %v", host, err))
			continue
		}
		conn.Close()
		if tc == nil {
			if serves := speaksTLS(host, timeout); serves {
				return fmt.Errorf("etcd at %s requires TLS: pass --ca-file (and --cert-file/--key-file if it requires client certificates)", host)
			}
			found = append(found, fmt.Sprintf("%s: connects but etcd did not answer", host))
			continue
		}
		if err := tlsHandshake(host, tc, timeout); err != nil {
			return fmt.Errorf("etcd at %s: TLS handshake failed: %s", host, tlsReason(err))
		}
		found = append(found, fmt.Sprintf("%s: TLS handshake works but etcd did not answer", host))
	}
	return fmt.Errorf("etcd unreachable at %s within %v: could not connect (%s)", at, timeout, strings.Join(found, "; "))
}

// endpointHost strips a scheme from an endpoint: etcd takes both forms.
func endpointHost(ep string) string {
	if u, err := url.Parse(ep); err == nil && u.Host != "" {
		return u.Host
	}
	return ep
}

// speaksTLS says whether the server at host completes a TLS handshake
// (certificates not checked: only the mode is asked).
func speaksTLS(host string, timeout time.Duration) bool {
	err := tlsHandshake(host, &tls.Config{InsecureSkipVerify: true}, timeout) //nolint:gosec // probing the mode, nothing is sent
	// A TLS alert (a client certificate required, say) is TLS too.
	var alert tls.AlertError
	return err == nil || errors.As(err, &alert) || strings.Contains(err.Error(), "remote error: tls:")
}

func tlsHandshake(host string, tc *tls.Config, timeout time.Duration) error {
	tc = tc.Clone()
	if tc.ServerName == "" {
		if h, _, err := net.SplitHostPort(host); err == nil {
			tc.ServerName = h
		}
	}
	d := &net.Dialer{Timeout: timeout}
	conn, err := tls.DialWithDialer(d, "tcp", host, tc)
	if err != nil {
		return err
	}
	defer conn.Close()
	// With TLS 1.3 a refused client certificate shows on the first read.
	_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b [1]byte
	if _, err := conn.Read(b[:]); err != nil && !isTimeout(err) && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// tlsReason turns a handshake error into what to change.
func tlsReason(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "etcd serves plain connections here: drop --ca-file/--cert-file/--key-file, or point --endpoints at its TLS port"
	case strings.Contains(msg, "certificate required"), strings.Contains(msg, "bad certificate"):
		return "etcd requires a client certificate it trusts: pass --cert-file and --key-file (" + msg + ")"
	case strings.Contains(msg, "x509:"), strings.Contains(msg, "tls: failed to verify"):
		return "etcd's certificate did not verify against --ca-file (" + msg + ")"
	}
	return msg
}

// quorumProblem asks the members behind the endpoints for their status
// after a request did not get an answer: a member without a leader
// answers Status (served locally) while it cannot serve a read or a
// write. It returns an error naming the cause, or nil when every member
// that answered has a leader.
func quorumProblem(client *clientv3.Client, endpoints []string, timeout time.Duration) error {
	var noLeader []string
	for _, ep := range endpoints {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		st, err := client.Status(ctx, ep)
		cancel()
		if err != nil {
			continue
		}
		if st.Leader == 0 {
			noLeader = append(noLeader, endpointHost(ep))
		}
	}
	if len(noLeader) == 0 {
		return nil
	}
	members := ""
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if ml, err := client.MemberList(ctx, clientv3.WithSerializable()); err == nil {
		members = fmt.Sprintf(" of %d members; %d must answer", len(ml.Members), len(ml.Members)/2+1)
	}
	return fmt.Errorf("etcd has no quorum: the member at %s has no leader (too few members answering%s); the placement can be neither read nor changed until a majority of the etcd members is back: `tessera etcd members` shows which, docs/etcd.md says what to do",
		strings.Join(noLeader, ","), members)
}
