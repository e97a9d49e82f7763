package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// NewEtcdCommand returns `etcd`: the etcd members behind the placement, as
// an operator sees them (members with their health) and changes them
// (add-member, remove-member) when a seed node joins or leaves. Seed nodes
// run these members (etcd.embedded); docs/etcd.md has the procedure.
func NewEtcdCommand() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "List and change the etcd members that hold the placement",
		Long: `List and change the etcd cluster's members. Seed nodes (etcd.embedded.enabled)
each run one member; a majority of the members must answer for the placement to
be read or changed. See docs/etcd.md before removing a member.`,
	}
	f := cmd.PersistentFlags()
	f.StringSliceVar(&o.endpoints, "endpoints", envList(EnvEndpoints, "127.0.0.1:2379"), "etcd endpoints, host:port, comma separated (env "+EnvEndpoints+")")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	f.DurationVar(&o.timeout, "timeout", 5*time.Second, "give up on etcd after this long")
	o.security.addFlags(f)
	cmd.AddCommand(newMembersCommand(o), newAddMemberCommand(o), newRemoveMemberCommand(o))
	quiet(cmd)
	return cmd
}

// memberStatus is one member as `etcd members` reports it.
type memberStatus struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
	Learner    bool     `json:"learner,omitempty"`
	// Health: "leader", "follower", "no leader", "not started" (added,
	// never joined) or "unreachable: <why>".
	Health  string `json:"health"`
	Version string `json:"version,omitempty"`
	DBSize  int64  `json:"dbSize,omitempty"`
}

func newMembersCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "members",
		Short: "List the etcd members with their health (works without quorum)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.withClient(cmd, false, func(ctx context.Context, client *clientv3.Client) error {
				ms, err := members(ctx, client, probeTimeout(o.timeout))
				if err != nil {
					return err
				}
				return o.printMembers(cmd.OutOrStdout(), ms)
			})
		},
	}
}

func newAddMemberCommand(o *options) *cobra.Command {
	var peerURL string
	cmd := &cobra.Command{
		Use:   "add-member NAME --peer-url URL",
		Short: "Add a member that a new seed node will run; prints the config it must start with",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if peerURL == "" {
				return fmt.Errorf("--peer-url is required: the URL the new member's peers reach it at (its etcd.embedded.peerURL)")
			}
			name := args[0]
			return o.withClient(cmd, true, func(ctx context.Context, client *clientv3.Client) error {
				resp, err := client.MemberAdd(ctx, []string{peerURL})
				if err != nil {
					return fmt.Errorf("add member %s (%s): %w", name, peerURL, err)
				}
				var cluster []string
				for _, m := range resp.Members {
					n := m.Name
					if m.ID == resp.Member.ID {
						n = name
					}
					for _, u := range m.PeerURLs {
						cluster = append(cluster, n+"="+u)
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "member %s added as %x; start its node with:\n\netcd:\n  embedded:\n    enabled: true\n    name: %s\n    peerURL: %s\n    initialCluster: %s\n    initialClusterState: existing\n",
					name, resp.Member.ID, name, peerURL, strings.Join(cluster, ","))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&peerURL, "peer-url", "", "the new member's peer URL (its etcd.embedded.peerURL)")
	return cmd
}

func newRemoveMemberCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "remove-member NAME|ID",
		Short: "Remove a member (a seed node that left); needs quorum",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.withClient(cmd, true, func(ctx context.Context, client *clientv3.Client) error {
				ml, err := client.MemberList(ctx, clientv3.WithSerializable())
				if err != nil {
					return fmt.Errorf("list members: %w", err)
				}
				var id uint64
				for _, m := range ml.Members {
					if m.Name == args[0] || strconv.FormatUint(m.ID, 16) == strings.ToLower(args[0]) {
						id = m.ID
					}
				}
				if id == 0 {
					return fmt.Errorf("no etcd member named %q (see `tessera etcd members`)", args[0])
				}
				if len(ml.Members) == 1 {
					return fmt.Errorf("%s is the last etcd member: removing it would lose the placement", args[0])
				}
				if _, err := client.MemberRemove(ctx, id); err != nil {
					return fmt.Errorf("remove member %s: %w", args[0], err)
				}
				ms, err := members(ctx, client, probeTimeout(o.timeout))
				if err != nil {
					return err
				}
				return o.printMembers(cmd.OutOrStdout(), ms)
			})
		},
	}
}

// members lists the members (serializable: answered without quorum) and
// asks each for its status on its client URLs.
func members(ctx context.Context, client *clientv3.Client, probe time.Duration) ([]memberStatus, error) {
	ml, err := client.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	out := make([]memberStatus, 0, len(ml.Members))
	for _, m := range ml.Members {
		ms := memberStatus{ID: strconv.FormatUint(m.ID, 16), Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, Learner: m.IsLearner}
		switch {
		case len(m.ClientURLs) == 0:
			ms.Health = "not started"
		default:
			ms.Health = "unreachable"
		urls:
			for _, u := range m.ClientURLs {
				sctx, cancel := context.WithTimeout(ctx, probe)
				st, err := client.Status(sctx, u)
				cancel()
				if err != nil {
					ms.Health = "unreachable: " + strings.Join(strings.Fields(err.Error()), " ")
					continue
				}
				ms.Version, ms.DBSize = st.Version, st.DbSize
				switch {
				case st.Leader == 0:
					ms.Health = "no leader"
				case st.Leader == m.ID:
					ms.Health = "leader"
				default:
					ms.Health = "follower"
				}
				break urls
			}
		}
		out = append(out, ms)
	}
	return out, nil
}

func (o *options) printMembers(w io.Writer, ms []memberStatus) error {
	if o.output == "json" {
		b, err := json.MarshalIndent(ms, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	healthy := 0
	for _, m := range ms {
		if m.Health == "leader" || m.Health == "follower" {
			healthy++
		}
	}
	quorum := "quorum"
	if healthy < len(ms)/2+1 {
		quorum = "NO QUORUM"
	}
	fmt.Fprintf(w, "members %d  healthy %d  %s (needs %d)\n", len(ms), healthy, quorum, len(ms)/2+1)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tHEALTH\tPEER URLS\tCLIENT URLS\t")
	for _, m := range ms {
		name := dash(m.Name)
		if m.Learner {
			name += " (learner)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", m.ID, name, m.Health, strings.Join(m.PeerURLs, ","), dash(strings.Join(m.ClientURLs, ",")))
	}
	return tw.Flush()
}
