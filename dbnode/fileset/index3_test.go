package fileset

import (
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/encoding/encodingtest"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/tessera-tsdb/tessera/ident"
)

// writeBlockIndexVersion writes a volume as WriteBlock does, with the
// index in the given version (2: raw sections, as written before version
// 3).
func writeBlockIndexVersion(t testing.TB, root string, id BlockID, shards []ShardSeries, version uint32) {
	t.Helper()
	w, err := CreateBlock(vfs.OS(), root, id, testBlockSize)
	require.NoError(t, err)
	w.indexVersion = version
	for _, ss := range shards {
		require.NoError(t, w.WriteShard(ss.Shard, ss.Series))
	}
	require.NoError(t, w.Finish())
}

// resealHead fixes the CRC of an index head as decodeBlockIndexHead will
// delimit it (both versions), so fuzzed heads reach the field checks.
// It returns the shard count read, or false if the head is too short to
// delimit.
func resealHead(b []byte) (uint32, bool) {
	d := newDecoder(b)
	hdr := d.Take(headerSize, "")
	d.Take(int(d.U16("")), "")
	d.U64("")
	d.U64("")
	d.U32("")
	n := d.U32("")
	if d.Err != nil || uint64(n) > uint64(len(d.B))/shardRowSize {
		return 0, false
	}
	end := len(b) - len(d.B) + int(n)*shardRowSize
	if binary.LittleEndian.Uint32(hdr[4:]) != blockVersion {
		if end+4 > len(b) {
			return 0, false
		}
		end += 4 + int(binary.LittleEndian.Uint32(b[end:]))
	}
	if end < 0 || end+4 > len(b) {
		return 0, false
	}
	binary.LittleEndian.PutUint32(b[end:], crc32c(b[:end]))
	return n, true
}

// TestBlockIndexVersions: volumes whose index was written before version
// 3 (raw sections) still open and read; version 3 reads the same series
// back from a smaller index, including volumes of empty sections only.
func TestBlockIndexVersions(t *testing.T) {
	shards := genShards([]uint32{0, 3, 17, 4095}, 300, 1000)
	shards = append(shards[:2], append([]ShardSeries{{Shard: 9}}, shards[2:]...)...) // an empty section
	sizes := map[uint32]int64{}
	for _, version := range []uint32{blockVersion, blockIndexVersion} {
		for _, tc := range []struct {
			name   string
			shards []ShardSeries
		}{{"series", shards}, {"empty", []ShardSeries{{Shard: 1}, {Shard: 2}}}} {
			root := t.TempDir()
			id := testBlockID(0)
			writeBlockIndexVersion(t, root, id, tc.shards, version)
			ix, err := os.ReadFile(blockFilePath(root, id, kindIndex))
			require.NoError(t, err)
			require.EqualValues(t, version, binary.LittleEndian.Uint32(ix[4:8]))
			if tc.name == "series" {
				sizes[version] = int64(len(ix))
			}
			v := openBlockTest(t, root, id)
			require.NoError(t, v.Verify())
			for _, ss := range tc.shards {
				r, ok, err := v.OpenShard(ss.Shard)
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, len(ss.Series), r.Len())
				for _, s := range ss.Series {
					data, ok, err := r.Read(s.ID)
					require.NoError(t, err)
					require.True(t, ok)
					require.Equal(t, s.Data, data)
				}
				require.NoError(t, r.Verify())
				require.NoError(t, r.Close())
			}
			require.NoError(t, v.Close())
		}
	}
	t.Logf("index bytes: version 2 %d, version 3 %d", sizes[blockVersion], sizes[blockIndexVersion])
	require.Less(t, sizes[blockIndexVersion], sizes[blockVersion]/2)
}

// TestBlockIndexV3Damage: a damaged compressed section costs its shard
// only, whichever byte (length, frame); a damaged dictionary fails the
// head's CRC, so the volume does not open (ErrCorrupt naming the index).
func TestBlockIndexV3Damage(t *testing.T) {
	shards := genShards([]uint32{1, 2, 3}, 200, 500)
	root := t.TempDir()
	id := testBlockID(0)
	require.NoError(t, WriteBlock(vfs.OS(), root, id, testBlockSize, shards))
	v := openBlockTest(t, root, id)
	require.NotEmpty(t, v.head.dict)
	sec := v.head.sections[1]
	dictEnd := v.head.size - 4
	require.NoError(t, v.Close())
	path := blockFilePath(root, id, kindIndex)
	orig, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, off := range []int64{sec.index.offset, sec.index.offset + 5, sec.index.offset + sec.index.size - 1} {
		require.NoError(t, os.WriteFile(path, orig, 0o644))
		flipByte(t, path, off)
		v := openBlockTest(t, root, id)
		for _, ss := range shards {
			r, ok, err := v.OpenShard(ss.Shard)
			require.True(t, ok)
			if ss.Shard == 2 {
				require.ErrorIs(t, err, ErrCorrupt, "offset %d", off)
				require.Contains(t, err.Error(), "shard 2")
				continue
			}
			require.NoError(t, err)
			require.Equal(t, len(ss.Series), r.Len())
			require.NoError(t, r.Close())
		}
		require.NoError(t, v.Close())
	}
	require.NoError(t, os.WriteFile(path, orig, 0o644))
	flipByte(t, path, dictEnd-10)
	_, err = OpenBlock(vfs.OS(), root, id, OpenOptions{})
	require.ErrorIs(t, err, ErrCorrupt)
	require.Contains(t, err.Error(), "index")
}

// FuzzSectionV3 feeds arbitrary bytes to the compressed section decoder
// (index versions 3 and 4: kinds says whether entries end with their
// kind), with and without the dictionary of a real volume: an error or a
// section that passes every check, its kinds valid and counted, never a
// panic or an allocation beyond the recorded size.
func FuzzSectionV3(f *testing.F) {
	root := f.TempDir()
	id := testBlockID(0)
	shards := kindShards()
	if err := WriteBlock(vfs.OS(), root, id, testBlockSize, shards); err != nil {
		f.Fatal(err)
	}
	v, err := OpenBlock(vfs.OS(), root, id, OpenOptions{})
	if err != nil {
		f.Fatal(err)
	}
	dict := v.head.dict
	for _, s := range v.head.sections {
		f.Add(append([]byte(nil), v.ix[s.index.offset:s.index.offset+s.index.size]...), true, s.seriesCount, s.pageCount, true)
	}
	f.Add([]byte{0, 0, 0, 0}, false, uint64(0), uint64(0), false)
	s0 := v.head.sections[0]
	dataStart, dataEnd := s0.data.offset, s0.data.offset+s0.data.size
	_ = v.Close()
	dec, err := newDictDecoder(dict)
	if err != nil {
		f.Fatal(err)
	}
	defer dec.Close()
	f.Fuzz(func(t *testing.T, b []byte, withDict bool, nSeries, nPages uint64, kinds bool) {
		d := dec
		if !withDict {
			d = nil
		}
		raw, err := decompressSection(b, 64<<10, d)
		if err != nil {
			return
		}
		if len(raw) != int(binary.LittleEndian.Uint32(b)) {
			t.Fatalf("decompressed %d bytes, recorded %d", len(raw), binary.LittleEndian.Uint32(b))
		}
		sd := newDecoder(raw)
		ix, _, _, err := decodeSection(&sd, nSeries, nPages, dataStart, dataEnd, kinds)
		if err != nil {
			return
		}
		hist := 0
		for i, e := range ix.entries {
			switch {
			case !kinds && e.kind != KindUnknown:
				t.Fatalf("entry %d: kind %d from a section without kinds", i, e.kind)
			case kinds && e.kind != KindFloats && e.kind != KindHistograms:
				t.Fatalf("entry %d: accepted kind %d", i, e.kind)
			}
			if e.kind == KindHistograms {
				hist++
			}
		}
		if hist != ix.hist || ix.kinds != kinds {
			t.Fatalf("%d histogram entries, index counts %d (kinds %v/%v)", hist, ix.hist, ix.kinds, kinds)
		}
	})
}

// BenchmarkOpenBlockShards opens a volume of node_exporter series (70
// hosts, ~8,000 series over 4096 shards) and every shard in it, with the
// index in version 2 (raw sections) and version 3 (compressed): the cost
// of the smaller index at start and at every shard open.
func BenchmarkOpenBlockShards(b *testing.B) {
	cfg := encodingtest.DefaultNodeExporter
	cfg.Hosts, cfg.Samples = 70, 2
	by := map[uint32][]Series{}
	for _, s := range encodingtest.NodeExporter(cfg) {
		sh := ident.Shard(s.ID, ident.DefaultNumShards)
		by[sh] = append(by[sh], Series{ID: s.ID, Data: []byte{2, 1, 2, 3}, Samples: 2})
	}
	var shards []ShardSeries
	for sh, ss := range by {
		shards = append(shards, ShardSeries{Shard: sh, Series: ss})
	}
	sort.Slice(shards, func(i, j int) bool { return shards[i].Shard < shards[j].Shard })
	for _, version := range []uint32{blockVersion, blockIndexVersion} {
		b.Run(fmt.Sprintf("index=v%d", version), func(b *testing.B) {
			root := b.TempDir()
			id := testBlockID(0)
			writeBlockIndexVersion(b, root, id, shards, version)
			for b.Loop() {
				v, err := OpenBlock(vfs.OS(), root, id, OpenOptions{})
				require.NoError(b, err)
				for _, ss := range shards {
					r, _, err := v.OpenShard(ss.Shard)
					require.NoError(b, err)
					require.NoError(b, r.Close())
				}
				require.NoError(b, v.Close())
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(shards)), "ns/shard")
		})
	}
}
