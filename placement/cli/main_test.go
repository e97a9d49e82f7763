package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// binary is the placement CLI built from internal/clitest for the
// end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "placement-cli")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "placement")
	build := exec.Command("go", "build", "-o", binary, "./internal/clitest")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the CLI:", err)
		os.Exit(1)
	}
	code := 0
	defer func() {
		os.RemoveAll(dir)
		os.Exit(code)
	}()
	// goleak.VerifyTestMain would os.Exit before the cleanup; run the
	// check by hand instead.
	code = m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
}
