package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tessera-tsdb/tessera/internal/version"
)

// versionCommand prints the same line as `tessera --version`.
func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Tessera's version and the commit it was built from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version.Get())
			return err
		},
	}
}
