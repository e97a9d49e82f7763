// Package cli is the `placement` command tree: an operator's view of the
// placement in etcd (get, init, add, remove, replace, mark-available). The
// binary wires NewCommand in as `tessera placement`.
//
// Every command prints the resulting placement, as a table (default) or as
// JSON (-o json), and exits non-zero with a one-line reason on any error.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/connectivity"

	"github.com/tessera-tsdb/tessera/placement"
)

// Environment variables that set the persistent flags' defaults, so a
// shell (or docker compose with a moved etcd port) sets them once; a flag
// given on the command line wins.
const (
	EnvEndpoints = "TESSERA_ETCD_ENDPOINTS"
	EnvCluster   = "TESSERA_CLUSTER"
)

// options are the persistent flags every subcommand shares.
type options struct {
	endpoints []string
	cluster   string
	output    string
	timeout   time.Duration
	security  etcdSecurity
}

// NewCommand returns the `placement` command and its subcommands.
func NewCommand() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "placement",
		Short: "Read and change the cluster's shard placement in etcd",
		Long: `Read and change which instance owns which shard, stored in etcd.

Changes are compare-and-swap writes: two operators never both win. Add,
remove and replace are refused while shards are still moving unless
--force; removing an instance whose shards are all still INITIALIZING
undoes its add and needs no --force.`,
	}
	f := cmd.PersistentFlags()
	f.StringSliceVar(&o.endpoints, "endpoints", envList(EnvEndpoints, "127.0.0.1:2379"), "etcd endpoints, host:port, comma separated (env "+EnvEndpoints+")")
	f.StringVar(&o.cluster, "cluster", envOr(EnvCluster, "default"), "cluster name: the placement key is "+placement.KeyPrefix+"<cluster> (env "+EnvCluster+")")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	f.DurationVar(&o.timeout, "timeout", 5*time.Second, "give up on etcd after this long")
	o.security.addFlags(f)

	cmd.AddCommand(
		newGetCommand(o),
		newInitCommand(o),
		newAddCommand(o),
		newRemoveCommand(o),
		newReplaceCommand(o),
		newMarkAvailableCommand(o),
	)
	quiet(cmd)
	return cmd
}

// quiet stops cobra from printing usage after runtime errors, on every
// command of the tree (cobra reads the flag from the command that ran and
// from the root, and the root may be the caller's).
func quiet(cmd *cobra.Command) {
	cmd.SilenceUsage = true
	for _, c := range cmd.Commands() {
		quiet(c)
	}
}

// run connects to etcd, runs fn against the cluster's store within the
// timeout, prints the resulting placement, and turns errors into one line.
// mutates says whether fn may write: a deadline that passes once etcd was
// reached then means the write may have landed, which the error says.
func (o *options) run(cmd *cobra.Command, mutates bool, fn func(context.Context, *placement.Store) (placement.Placement, error)) error {
	return o.withClient(cmd, mutates, func(ctx context.Context, client *clientv3.Client) error {
		p, err := fn(ctx, placement.NewStore(client, placement.StoreOptions{Cluster: o.cluster}))
		if err != nil {
			return err
		}
		return o.print(cmd.OutOrStdout(), p)
	})
}

// withClient connects to etcd (saying why when it cannot), runs fn within
// the timeout, and turns its error into one line that says why: no
// quorum, a deadline after a change was sent, or fn's own error.
func (o *options) withClient(cmd *cobra.Command, mutates bool, fn func(context.Context, *clientv3.Client) error) error {
	if err := o.validate(); err != nil {
		return err
	}
	ec := clientv3.Config{
		Endpoints:   o.endpoints,
		DialTimeout: o.timeout,
		Logger:      zap.NewNop(),
	}
	if err := o.security.apply(&ec); err != nil {
		return oneLine(err)
	}
	client, err := clientv3.New(ec)
	if err != nil {
		return oneLine(fmt.Errorf("connect to etcd %s: %w", strings.Join(o.endpoints, ","), err))
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	defer cancel()
	if !connect(ctx, client) {
		return oneLine(diagnoseConnect(o.endpoints, ec.TLS, probeTimeout(o.timeout)))
	}
	if err := fn(ctx, client); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			if qerr := quorumProblem(client, o.endpoints, probeTimeout(o.timeout)); qerr != nil {
				if mutates {
					qerr = fmt.Errorf("%w; once it is back, check with `tessera placement get` whether the change was applied", qerr)
				}
				return oneLine(qerr)
			}
		}
		return oneLine(o.explain(err, mutates))
	}
	return nil
}

// probeTimeout bounds each diagnostic probe after the request's own
// timeout was spent.
func probeTimeout(timeout time.Duration) time.Duration {
	return min(timeout, 2*time.Second)
}

// connect waits until the client holds a ready connection to one of the
// endpoints, and reports whether it got one before ctx ended. Telling a
// failure to connect apart from a slow answer is what lets the CLI say
// "unreachable" only when nothing can have been sent.
func connect(ctx context.Context, client *clientv3.Client) bool {
	conn := client.ActiveConnection()
	conn.Connect()
	for {
		state := conn.GetState()
		if state == connectivity.Ready {
			return true
		}
		if !conn.WaitForStateChange(ctx, state) {
			return false
		}
	}
}

// explain rewrites a deadline that passed after etcd was reached: a read
// just did not get its answer in time; a change may have been applied by
// etcd even though its answer never came back.
func (o *options) explain(err error, mutates bool) error {
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	at := strings.Join(o.endpoints, ",")
	if !mutates {
		return fmt.Errorf("etcd at %s did not answer within %v (--timeout): %w", at, o.timeout, err)
	}
	return fmt.Errorf("etcd at %s did not answer within %v (--timeout); the change may have been applied: check with `tessera placement get` before trying again: %w", at, o.timeout, err)
}

// envOr returns the environment variable's value, or def when it is unset
// or empty.
func envOr(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}

// envList is envOr for a comma-separated list.
func envList(name, def string) []string {
	var out []string
	for _, v := range strings.Split(envOr(name, def), ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// validate checks the persistent flags. It runs inside each command rather
// than as a PersistentPreRun hook, so it cannot shadow (or be shadowed by)
// the hooks of the binary the tree is wired into.
func (o *options) validate() error {
	switch o.output {
	case "table", "json":
	default:
		return fmt.Errorf("-o %q: want table or json", o.output)
	}
	if o.timeout <= 0 {
		return fmt.Errorf("--timeout must be positive")
	}
	if len(o.endpoints) == 0 {
		return fmt.Errorf("--endpoints: need at least one etcd endpoint")
	}
	return nil
}

// oneLine keeps an error message on one line, as the CLI promises.
func oneLine(err error) error {
	if err == nil {
		return nil
	}
	msg := strings.Join(strings.Fields(err.Error()), " ")
	return errors.New(msg)
}
