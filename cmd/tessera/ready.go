package main

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"github.com/tessera-tsdb/tessera/internal/tlsfiles"
)

// maxReadyBody bounds the /ready answer printed (a few hundred bytes,
// more with damage lines).
const maxReadyBody = 4 << 10

// readyCommand checks a node's /ready, for health checks in images with
// no shell or curl (the docker image is FROM scratch).
func readyCommand() *cobra.Command {
	var url string
	var timeout time.Duration
	var caFile string
	cmd := &cobra.Command{
		Use:   "ready",
		Short: "Exit 0 if the node at --url is ready (GET /ready answers 200), 1 otherwise",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := &http.Client{Timeout: timeout}
			if caFile != "" { // an https:// node with a private CA
				tc, err := tlsfiles.Client(tlsfiles.Files{CAFile: caFile})
				if err != nil {
					return fmt.Errorf("--ca-file: %w", err)
				}
				c.Transport = &http.Transport{TLSClientConfig: tc}
			}
			resp, err := c.Get(url + "/ready")
			if err != nil {
				return fmt.Errorf("not ready: %w", err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, maxReadyBody))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("not ready: HTTP %d: %s", resp.StatusCode, body)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s", body)
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "http://127.0.0.1:7201", "node base URL")
	cmd.Flags().StringVar(&caFile, "ca-file", "", "CA certificate (PEM) that verifies an https:// node")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "request timeout")
	return cmd
}
