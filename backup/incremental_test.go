package backup

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
)

type blockAt struct {
	shard uint32
	start int64
}

func blockRefs(m *Manifest) map[blockAt]ObjectRef {
	out := map[blockAt]ObjectRef{}
	for _, s := range m.Shards {
		for _, o := range s.Objects {
			if o.Kind == KindBlock {
				out[blockAt{s.Shard, o.BlockStart}] = o
			}
		}
	}
	return out
}

// TestIncrementalReferencesUnchangedVolumes: a backup given the previous
// one references the parts of sealed volumes that have not changed
// (same node, volume index and checkpoint digest) without reading them;
// a block that took a cold write is in a new volume and is read again;
// a part the bucket lost is read and uploaded again. The backup restores
// bit for bit.
func TestIncrementalReferencesUnchangedVolumes(t *testing.T) {
	ctx := context.Background()
	clk := storagetest.NewClock(t0.Add(5*time.Hour + 30*time.Minute))
	db, dir := openDB(t, clk)
	const n = 40
	base := t0.UnixMilli()
	var ts []int64
	for x := base; x < clk.Now().UnixMilli(); x += 10 * 60_000 {
		ts = append(ts, x)
	}
	write(t, db, n, ts...)
	require.NoError(t, db.Tick())
	b, _ := fsBucket(t)
	m1, p1 := backupDB(t, db, dir, b, "first")
	require.Zero(t, p1.Reused)
	first := blockRefs(m1)
	require.NotEmpty(t, first)
	for k, o := range first {
		require.NotNil(t, o.From, "block %v records its volume", k)
		require.Equal(t, "n1", o.From.Node)
	}

	// A cold write to three series of the first block (a new volume for
	// their shards), and one unchanged part lost from the bucket.
	write(t, db, 3, base+60_000)
	require.NoError(t, db.Tick())
	var lost blockAt
	for k := range first {
		if k.start != base {
			lost = k
			break
		}
	}
	require.NoError(t, b.Delete(ctx, first[lost].Key))

	m2, p2 := backupDBFrom(t, db, dir, b, "second", m1)
	second := blockRefs(m2)
	require.Len(t, second, len(first))
	changed, reused := 0, 0
	for k, o := range second {
		old := first[k]
		switch {
		case *o.From != *old.From:
			changed++
			require.Equal(t, base, k.start, "only the cold-written block changed")
			require.NotEqual(t, old.Key, o.Key)
		case k == lost:
			require.Equal(t, old.Key, o.Key, "read again: the same part")
		default:
			reused++
			require.Equal(t, old, o)
		}
	}
	require.Positive(t, changed)
	require.Equal(t, reused, p2.Reused)
	require.Equal(t, len(first)-changed-1, p2.Reused)
	ok, err := b.Exists(ctx, first[lost].Key)
	require.NoError(t, err)
	require.True(t, ok, "the lost part uploaded again")

	want := readAllSeries(t, db, n)
	got, rep := restoreInto(t, clk, b, "second")
	require.Empty(t, rep.Damaged)
	require.Equal(t, want, readAllSeries(t, got, n))
}
