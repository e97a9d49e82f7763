package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/node"
)

func nodeCommand() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "node [-f config.yml]",
		Short: "Run a database node (with no config: one node, embedded etcd, data in ./data, loopback only)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := config.Default()
			if file != "" {
				var err error
				if cfg, err = config.Load(file); err != nil {
					return err
				}
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			n, err := node.New(cfg, log)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return n.Run(ctx)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "YAML config file")
	return cmd
}
