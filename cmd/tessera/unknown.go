package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// refuseUnknownSubcommands makes every command that only groups others
// (`tessera placement`, `tessera repair`) fail on an argument that names no
// subcommand. Cobra prints such a group's help and exits 0 for `tessera
// placement getx`, so a script with a typo believes it ran. Without
// arguments the group still prints its help, as before.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !cmd.HasSubCommands() || cmd.Run != nil || cmd.RunE != nil || cmd.Parent() == nil {
		return
	}
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return fmt.Errorf("%s (see %s --help)", msg, c.CommandPath())
	}
}
