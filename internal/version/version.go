// Package version says which Tessera a binary is: its version and the
// commit it was built from, for `tessera version`, `tessera --version` and
// the node's /api/v1/status/buildinfo.
//
// The values come from the linker when the build sets them
// (deploy/build.sh does:
// -ldflags "-X github.com/tessera-tsdb/tessera/internal/version.Version=v1.2.3
// -X ...Revision=<sha> -X ...Date=<RFC 3339>"), otherwise from what the go
// command stamped into the binary (runtime/debug.ReadBuildInfo: the module
// version and, in a git checkout, vcs.revision/vcs.time/vcs.modified).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set with -ldflags -X at build time; empty means "ask the build info".
var (
	Version  string
	Revision string
	Date     string
)

// Info describes the running binary.
type Info struct {
	Version   string // v1.2.3, a Go pseudo-version, or "devel"
	Revision  string // the commit, "unknown" when the build did not record it
	Modified  bool   // built from a tree with uncommitted changes
	Date      string // commit (or build) time, RFC 3339; may be empty
	GoVersion string
}

// Get returns the running binary's version information.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(Version, Revision, Date, bi)
}

// resolve prefers the linker's values and falls back on the build info.
func resolve(version, revision, date string, bi *debug.BuildInfo) Info {
	in := Info{Version: version, Revision: revision, Date: date, GoVersion: runtime.Version()}
	if bi != nil {
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if in.Revision == "" {
					in.Revision = s.Value
				}
			case "vcs.time":
				if in.Date == "" {
					in.Date = s.Value
				}
			case "vcs.modified":
				in.Modified = revision == "" && s.Value == "true"
			}
		}
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
	}
	if in.Version == "" {
		in.Version = "devel"
	}
	if in.Revision == "" {
		in.Revision = "unknown"
	}
	return in
}

// String is the one line `tessera version` prints.
func (in Info) String() string {
	rev := in.Revision
	if in.Modified {
		rev += "+modified"
	}
	s := fmt.Sprintf("tessera %s (commit %s", in.Version, rev)
	if in.Date != "" {
		s += ", " + in.Date
	}
	return s + ", " + in.GoVersion + ")"
}
