package main

import (
	"github.com/spf13/cobra"
	"github.com/tessera-tsdb/tessera/placement/cli"
)

func placementCommand() []*cobra.Command {
	return []*cobra.Command{cli.NewCommand(), cli.NewEtcdCommand()}
}
