package fileset

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// kindShards returns shards 1 (floats only), 2 (every third series holds
// histograms: its payload is a container) and 3 (empty).
func kindShards() []ShardSeries {
	shards := genShards([]uint32{1, 2}, 30, 200)
	for _, ss := range shards {
		for i := range ss.Series {
			s := &ss.Series[i]
			if len(s.Data) == 0 {
				s.Data = []byte{0x02, 0}
			}
			s.Data[0] = 0x02
			if ss.Shard == 2 && i%3 == 0 {
				s.Data[0] = payloadContainer
			}
		}
	}
	return append(shards, ShardSeries{Shard: 3})
}

// TestBlockIndexKinds: an index of version 4 records each series' kind,
// told without reading a payload; volumes of index versions 2 and 3
// (written before) read the same payloads and say the kind is unknown.
func TestBlockIndexKinds(t *testing.T) {
	shards := kindShards()
	for _, version := range []uint32{blockVersion, indexCompressed, blockIndexVersion} {
		root := t.TempDir()
		id := testBlockID(0)
		writeBlockIndexVersion(t, root, id, shards, version)
		v := openBlockTest(t, root, id)
		for _, ss := range shards {
			r, ok, err := v.OpenShard(ss.Shard)
			require.NoError(t, err)
			require.True(t, ok)
			holds, known := r.HoldsHistograms()
			require.Equal(t, version == blockIndexVersion, known, "version %d", version)
			require.Equal(t, known && ss.Shard == 2, holds, "version %d shard %d", version, ss.Shard)
			for i, s := range ss.Series {
				k, ok := r.Kind(s.ID)
				require.True(t, ok)
				want := KindUnknown
				if known {
					want = KindFloats
					if ss.Shard == 2 && i%3 == 0 {
						want = KindHistograms
					}
				}
				require.Equal(t, want, k, "version %d shard %d series %d", version, ss.Shard, i)
				data, ok, err := r.Read(s.ID)
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, s.Data, data)
			}
			_, ok = r.Kind([]byte("absent"))
			require.False(t, ok)
			require.NoError(t, r.Verify())
			require.NoError(t, r.Close())
		}
	}
	// A version 1 fileset (per shard) knows no kinds either.
	root := t.TempDir()
	require.NoError(t, Write(vfs.OS(), root, testID(0, 0), testBlockSize, shards[1].Series))
	r, err := Open(vfs.OS(), root, testID(0, 0))
	require.NoError(t, err)
	defer r.Close()
	_, known := r.HoldsHistograms()
	require.False(t, known)
	k, ok := r.Kind(shards[1].Series[0].ID)
	require.True(t, ok)
	require.Equal(t, KindUnknown, k)
}

// TestSectionKindDamage: a kind byte other than floats or histograms is
// corruption of the section, not a kind taken on trust.
func TestSectionKindDamage(t *testing.T) {
	series := kindShards()[1].Series[:1]
	entries := make([]entry, 1)
	var buf rangeBuf
	pages, end, err := writePages(&buf, series, entries, headerSize)
	require.NoError(t, err)
	raw := appendSection(nil, series, entries, pages, true)
	require.Equal(t, byte(KindHistograms), raw[len(raw)-1])
	d := newDecoder(raw)
	ix, _, _, err := decodeSection(&d, 1, uint64(len(pages)), headerSize, end, true)
	require.NoError(t, err)
	require.NoError(t, d.done())
	require.Equal(t, 1, ix.hist)
	for _, bad := range []byte{0, 3, 0xff} {
		raw[len(raw)-1] = bad
		d := newDecoder(raw)
		_, _, _, err := decodeSection(&d, 1, uint64(len(pages)), headerSize, end, true)
		require.ErrorContains(t, err, "kind", "kind byte %d", bad)
	}
	// Read as a section without kinds, the kind byte is trailing garbage.
	d = newDecoder(raw)
	_, _, _, err = decodeSection(&d, 1, uint64(len(pages)), headerSize, end, false)
	require.NoError(t, err)
	require.Error(t, d.done())
}

type rangeBuf struct{ b []byte }

func (r *rangeBuf) Write(p []byte) (int, error) { r.b = append(r.b, p...); return len(p), nil }
