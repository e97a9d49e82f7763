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
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tessera-tsdb/tessera/placement"
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
	f.StringSliceVar(&o.endpoints, "endpoints", []string{"127.0.0.1:2379"}, "etcd endpoints, host:port, comma separated")
	f.StringVar(&o.cluster, "cluster", "default", "cluster name: the placement key is "+placement.KeyPrefix+"<cluster>")
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
func (o *options) run(cmd *cobra.Command, fn func(context.Context, *placement.Store) (placement.Placement, error)) error {
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
	p, err := fn(ctx, placement.NewStore(client, placement.StoreOptions{Cluster: o.cluster}))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("etcd unreachable at %s within %v", strings.Join(o.endpoints, ","), o.timeout)
		}
		return oneLine(err)
	}
	return oneLine(o.print(cmd.OutOrStdout(), p))
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
