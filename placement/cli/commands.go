package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/placement"
)

func newGetCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "get",
		Short: "Print the placement",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd, false, func(ctx context.Context, s *placement.Store) (placement.Placement, error) {
				return s.Get(ctx)
			})
		},
	}
}

func newInitCommand(o *options) *cobra.Command {
	var (
		rf          int
		numShards   uint32
		specs       []string
		ifNotExists bool
	)
	cmd := &cobra.Command{
		Use:   "init --rf N --shards N --instance id=...,group=...,endpoint=host:port [--instance ...]",
		Short: "Create the placement; every shard starts INITIALIZING",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ins, err := parseInstances(specs)
			if err != nil {
				return err
			}
			return o.run(cmd, true, func(ctx context.Context, s *placement.Store) (placement.Placement, error) {
				p, err := s.Init(ctx, ins, numShards, rf)
				if errors.Is(err, placement.ErrExists) && ifNotExists {
					// Idempotent set-up scripts (docker compose's init
					// service) print what is there and succeed.
					return s.Get(ctx)
				}
				return p, err
			})
		},
	}
	cmd.Flags().BoolVar(&ifNotExists, "if-not-exists", false, "succeed and print the existing placement when there is one")
	cmd.Flags().IntVar(&rf, "rf", 3, "replica factor: owners per shard, each in a different isolation group")
	cmd.Flags().Uint32Var(&numShards, "shards", ident.DefaultNumShards, "number of virtual shards (fixed for the life of the cluster)")
	addInstanceFlag(cmd, &specs)
	return cmd
}

func newAddCommand(o *options) *cobra.Command {
	var (
		specs []string
		force bool
	)
	cmd := &cobra.Command{
		Use:   "add --instance id=...,group=...,endpoint=host:port [--instance ...]",
		Short: "Add instances; they take INITIALIZING shards from the others",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ins, err := parseInstances(specs)
			if err != nil {
				return err
			}
			return o.run(cmd, true, func(ctx context.Context, s *placement.Store) (placement.Placement, error) {
				return s.Add(ctx, ins, placement.ChangeOptions{Force: force})
			})
		},
	}
	addInstanceFlag(cmd, &specs)
	addForceFlag(cmd, &force)
	return cmd
}

func newRemoveCommand(o *options) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "remove ID...",
		Short: "Remove instances; an instance still INITIALIZING gives its shards back (undo of add)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			return o.run(cmd, true, func(ctx context.Context, s *placement.Store) (placement.Placement, error) {
				return s.Remove(ctx, ids, placement.ChangeOptions{Force: force})
			})
		},
	}
	addForceFlag(cmd, &force)
	return cmd
}

func newReplaceCommand(o *options) *cobra.Command {
	var (
		leaving []string
		specs   []string
		force   bool
	)
	cmd := &cobra.Command{
		Use:   "replace --leaving ID --instance id=...,group=...,endpoint=host:port",
		Short: "Replace instances; the newcomers take over the leaving instances' shards",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(leaving) == 0 {
				return fmt.Errorf("--leaving: name at least one instance to replace")
			}
			ins, err := parseInstances(specs)
			if err != nil {
				return err
			}
			return o.run(cmd, true, func(ctx context.Context, s *placement.Store) (placement.Placement, error) {
				return s.Replace(ctx, leaving, ins, placement.ChangeOptions{Force: force})
			})
		},
	}
	cmd.Flags().StringArrayVar(&leaving, "leaving", nil, "ID of an instance to replace (repeatable)")
	addInstanceFlag(cmd, &specs)
	addForceFlag(cmd, &force)
	return cmd
}

func newMarkAvailableCommand(o *options) *cobra.Command {
	var shards []uint
	cmd := &cobra.Command{
		Use:   "mark-available ID [--shard N ...]",
		Short: "Mark an instance's INITIALIZING shards AVAILABLE (all of them without --shard)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids := make([]uint32, len(shards))
			for i, s := range shards {
				if s > uint(^uint32(0)) {
					return fmt.Errorf("--shard %d: out of range", s)
				}
				ids[i] = uint32(s)
			}
			return o.run(cmd, true, func(ctx context.Context, s *placement.Store) (placement.Placement, error) {
				return s.MarkAvailable(ctx, args[0], ids...)
			})
		},
	}
	cmd.Flags().UintSliceVar(&shards, "shard", nil, "shard to mark (repeatable or comma separated); default: all INITIALIZING shards of the instance")
	return cmd
}

func addInstanceFlag(cmd *cobra.Command, specs *[]string) {
	cmd.Flags().StringArrayVar(specs, "instance", nil,
		"instance as id=ID,group=GROUP,endpoint=HOST:PORT[,zone=ZONE][,weight=N][,http=HOST:PORT] (repeatable)")
}

func addForceFlag(cmd *cobra.Command, force *bool) {
	cmd.Flags().BoolVar(force, "force", false, "change the placement even while shards are still moving")
}
