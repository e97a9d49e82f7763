package version

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestResolve(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.99",
		Main:      debug.Module{Version: "v0.0.0-20261123180000-abcdef012345+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abcdef0123456789"},
			{Key: "vcs.time", Value: "2026-11-23T18:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	// From the go command's stamps.
	in := resolve("", "", "", bi)
	require.Equal(t, "v0.0.0-20261123180000-abcdef012345+dirty", in.Version)
	require.Equal(t, "abcdef0123456789", in.Revision)
	require.True(t, in.Modified)
	require.Equal(t, "tessera v0.0.0-20261123180000-abcdef012345+dirty (commit abcdef0123456789+modified, 2026-11-23T18:00:00Z, go1.99)", in.String())

	// The linker's values win.
	in = resolve("v1.2.3", "1234567", "2026-01-01T00:00:00Z", bi)
	require.Equal(t, Info{Version: "v1.2.3", Revision: "1234567", Date: "2026-01-01T00:00:00Z", GoVersion: "go1.99"}, in)

	// Nothing recorded (go build -buildvcs=false of a (devel) module).
	in = resolve("", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}})
	require.Equal(t, "devel", in.Version)
	require.Equal(t, "unknown", in.Revision)
	in = resolve("", "", "", nil)
	require.Equal(t, "devel", in.Version)
}
