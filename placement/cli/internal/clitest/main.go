// Command clitest runs the placement command tree on its own, so the CLI's
// end-to-end tests can build and exec it without the tessera binary.
package main

import (
	"os"

	"github.com/tessera-tsdb/tessera/placement/cli"
)

func main() {
	if err := cli.NewCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
