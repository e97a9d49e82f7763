package main

import "github.com/spf13/cobra"

// placementCommand is filled in once the placement CLI lands.
func placementCommand() []*cobra.Command { return nil }
