package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"github.com/tessera-tsdb/tessera/internal/clientsec"
	"github.com/tessera-tsdb/tessera/repair"
)

// repairCommand is `tessera repair status`: what a node's anti-entropy
// repair last found and did, per shard.
func repairCommand() *cobra.Command {
	root := &cobra.Command{Use: "repair", Short: "Anti-entropy repair of a node"}
	var (
		url     string
		output  string
		verbose bool
		timeout time.Duration
		sec     clientsec.Security
	)
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the repair pass and per-shard results of the node at --url",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("-o %q: want table or json", output)
			}
			// Secrets from the environment, so they stay out of `ps`.
			sec.CredentialsFromEnv()
			rt, err := sec.Wrap(http.DefaultTransport.(*http.Transport).Clone())
			if err != nil {
				return err
			}
			st, err := repair.FetchStatus(cmd.Context(), &http.Client{Timeout: timeout, Transport: rt}, url)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			return repair.WriteTable(cmd.OutOrStdout(), st, verbose)
		},
	}
	status.Flags().StringVar(&url, "url", "http://127.0.0.1:7201", "node base URL")
	status.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	status.Flags().BoolVarP(&verbose, "verbose", "v", false, "list every shard, not only those that differed or failed")
	status.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "request timeout")
	securityFlags(status.Flags(), &sec)
	root.AddCommand(status)
	return root
}
