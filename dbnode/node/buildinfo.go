package node

import (
	"github.com/tessera-tsdb/tessera/dbnode/promapi"
	"github.com/tessera-tsdb/tessera/internal/version"
)

// buildInfo is what /api/v1/status/buildinfo reports: Tessera's version
// and commit, not the Prometheus library's.
func buildInfo() promapi.BuildInfo {
	v := version.Get()
	rev := v.Revision
	if v.Modified {
		rev += "+modified"
	}
	return promapi.BuildInfo{
		Application: "Tessera",
		Version:     v.Version,
		Revision:    rev,
		BuildDate:   v.Date,
		GoVersion:   v.GoVersion,
	}
}
