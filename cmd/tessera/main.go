// Command tessera is the one binary of Tessera: `tessera node` runs a
// database node, `tessera placement` manages the cluster placement in etcd,
// `tessera bench` loads a node through remote write and checks it back.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/tessera-tsdb/tessera/internal/version"
)

func main() {
	root := &cobra.Command{
		Use:           "tessera",
		Short:         "Tessera: a distributed time-series database for Prometheus",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Get().Version,
	}
	root.SetVersionTemplate(version.Get().String() + "\n")
	root.AddCommand(nodeCommand(), benchCommand(), readyCommand(), versionCommand(), repairCommand(),
		snapshotCommand(), backupCommand())
	root.AddCommand(placementCommand()...)
	refuseUnknownSubcommands(root)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "tessera:", err)
		os.Exit(1)
	}
}
