package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/bootstrap"
)

func TestBootstrapReasonInHumanUnits(t *testing.T) {
	require.Equal(t, "bootstrapping: 3 shards INITIALIZING, waiting for the next round",
		bootstrapReason(3, bootstrap.Progress{}))
	p := bootstrap.Progress{Running: true, RoundShards: 4096, RoundStreamed: 1024, Samples: 28_400_000,
		Bytes: 3 << 29, Elapsed: 20 * time.Second, BytesPerSecond: 80 << 20, ETA: time.Minute}
	require.Equal(t, "bootstrapping: 4096 shards INITIALIZING: 1024/4096 shards streamed this round, "+
		"28.4 M samples and 1.5 GiB in 20s (80.0 MiB/s), about 1m0s left", bootstrapReason(4096, p))
	p.ETA = -1
	require.Contains(t, bootstrapReason(4096, p), "time left unknown")
}
