package fileset

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

func testBlockID(volume int) BlockID {
	return BlockID{Namespace: "default", BlockStart: 7200000, Volume: volume}
}

// genShards returns series for the given shards, each with n series.
func genShards(shards []uint32, n, maxSize int) []ShardSeries {
	out := make([]ShardSeries, len(shards))
	for i, s := range shards {
		out[i] = ShardSeries{Shard: s, Series: genSeries(n, uint64(s)+1, maxSize)}
	}
	return out
}

func openBlockTest(t testing.TB, root string, id BlockID) *Volume {
	t.Helper()
	v, err := OpenBlock(vfs.OS(), root, id, OpenOptions{Cache: NewPageCache(1 << 20)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

func TestBlockRoundTrip(t *testing.T) {
	root := t.TempDir()
	id := testBlockID(0)
	shards := genShards([]uint32{0, 3, 17, 4095}, 300, 1000)
	shards = append(shards[:2], append([]ShardSeries{{Shard: 9}}, shards[2:]...)...) // an empty section
	require.NoError(t, WriteBlock(vfs.OS(), root, id, testBlockSize, shards))

	// Three files, whatever the number of shards.
	entries, err := os.ReadDir(NamespaceDir(root, "default"))
	require.NoError(t, err)
	require.Len(t, entries, 3)

	ids, err := ListBlocks(vfs.OS(), root, "default")
	require.NoError(t, err)
	require.Equal(t, []BlockID{id}, ids)

	v := openBlockTest(t, root, id)
	require.Equal(t, []uint32{0, 3, 9, 17, 4095}, v.Shards())
	require.NoError(t, v.Verify())
	var readers []*Reader
	for _, ss := range shards {
		r, ok, err := v.OpenShard(ss.Shard)
		require.NoError(t, err)
		require.True(t, ok)
		readers = append(readers, r)
		require.Equal(t, id.Shard(ss.Shard), r.ID())
		require.Equal(t, 2, r.Version())
		require.Equal(t, len(ss.Series), r.Len())
		require.NoError(t, r.Verify())
	}
	_, ok, err := v.OpenShard(5)
	require.NoError(t, err)
	require.False(t, ok)
	// Readers outlive the volume.
	require.NoError(t, v.Close())
	for i, ss := range shards {
		r := readers[i]
		samples := 0
		for _, s := range ss.Series {
			data, ok, err := r.Read(s.ID)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, s.Data, data)
			samples += s.Samples
		}
		require.Equal(t, samples, r.Samples())
		n := 0
		require.NoError(t, r.RangeData(func(id, data []byte) error {
			require.Equal(t, ss.Series[n].ID, id)
			require.Equal(t, ss.Series[n].Data, data)
			n++
			return nil
		}))
		require.Equal(t, len(ss.Series), n)
		require.NoError(t, r.Close())
	}

	require.ErrorIs(t, WriteBlock(vfs.OS(), root, id, testBlockSize, shards), ErrExists)
	require.NoError(t, RemoveBlock(vfs.OS(), root, id))
	ids, err = ListBlocks(vfs.OS(), root, "default")
	require.NoError(t, err)
	require.Empty(t, ids)
}

func TestBlockWriterRejectsBadInput(t *testing.T) {
	root := t.TempDir()
	w, err := CreateBlock(vfs.OS(), root, testBlockID(0), testBlockSize)
	require.NoError(t, err)
	require.NoError(t, w.WriteShard(5, genSeries(3, 1, 10)))
	err = w.WriteShard(5, nil)
	require.ErrorIs(t, err, ErrInvalidInput)
	require.Contains(t, err.Error(), "increasing")
	require.Error(t, w.Finish())
	w.Abort()
	entries, err := os.ReadDir(NamespaceDir(root, "default"))
	require.NoError(t, err)
	require.Empty(t, entries)

	w, err = CreateBlock(vfs.OS(), root, testBlockID(0), testBlockSize)
	require.NoError(t, err)
	unsorted := genSeries(3, 1, 10)
	unsorted[0], unsorted[1] = unsorted[1], unsorted[0]
	require.ErrorIs(t, w.WriteShard(1, unsorted), ErrInvalidInput)
	w.Abort()
}

// TestBlockSectionDamageCostsOneShard flips a byte in one shard's index
// section and one in another shard's data: the first shard fails to open,
// the second fails on reads of the damaged page only, every other shard
// reads back whole.
func TestBlockSectionDamageCostsOneShard(t *testing.T) {
	root := t.TempDir()
	id := testBlockID(0)
	shards := genShards([]uint32{1, 2, 3, 4}, 500, 1000)
	require.NoError(t, WriteBlock(vfs.OS(), root, id, testBlockSize, shards))
	v := openBlockTest(t, root, id)
	sec := v.head.sections
	flipByte(t, blockFilePath(root, id, kindIndex), sec[1].index.offset+sec[1].index.size/2)
	r3, _, err := v.OpenShard(3)
	require.NoError(t, err)
	page := r3.ix.pages[1]
	require.NoError(t, r3.Close())
	flipByte(t, blockFilePath(root, id, kindData), page.offset+int64(page.clen)/2)

	v = openBlockTest(t, root, id) // the head is intact: the volume opens
	require.ErrorIs(t, v.Verify(), ErrCorrupt)
	_, ok, err := v.OpenShard(2)
	require.True(t, ok)
	require.ErrorIs(t, err, ErrCorrupt)
	require.Contains(t, err.Error(), "shard 2")
	for _, ss := range shards {
		if ss.Shard == 2 {
			continue
		}
		r, ok, err := v.OpenShard(ss.Shard)
		require.NoError(t, err)
		require.True(t, ok)
		bad := 0
		for i, s := range ss.Series {
			data, ok, err := r.Read(s.ID)
			if ss.Shard == 3 && r.ix.entries[i].page == 1 {
				require.ErrorIs(t, err, ErrCorrupt)
				bad++
				continue
			}
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, s.Data, data)
		}
		if ss.Shard == 3 {
			require.Positive(t, bad)
			require.ErrorIs(t, r.Verify(), ErrCorrupt)
		} else {
			require.NoError(t, r.Verify())
		}
		require.NoError(t, r.Close())
	}
}

// TestBlockHeadDamage: damage to the checkpoint or the index's head makes
// the volume unopenable (ErrCorrupt, naming the file), never a panic.
func TestBlockHeadDamage(t *testing.T) {
	for _, tc := range []struct {
		kind fileKind
		off  int64
	}{{kindCheckpoint, 10}, {kindIndex, 2}, {kindIndex, 30}, {kindData, 1}} {
		t.Run(string(tc.kind), func(t *testing.T) {
			root := t.TempDir()
			id := testBlockID(0)
			require.NoError(t, WriteBlock(vfs.OS(), root, id, testBlockSize, genShards([]uint32{1, 2}, 50, 100)))
			flipByte(t, blockFilePath(root, id, tc.kind), tc.off)
			_, err := OpenBlock(vfs.OS(), root, id, OpenOptions{})
			require.ErrorIs(t, err, ErrCorrupt)
			require.Contains(t, err.Error(), string(tc.kind))
		})
	}
}

// TestResolveIncompleteBlocks: a volume without a valid checkpoint is
// deleted only when its pending marker shows an interrupted flush or
// removal; otherwise (the checkpoint deleted or damaged) it is moved aside
// and reported, never deleted. A stale marker beside a valid checkpoint
// goes. Before the marker, the two damaged volumes here were deleted.
func TestResolveIncompleteBlocks(t *testing.T) {
	root := t.TempDir()
	ok, torn, gone, flushing, tornFlushing, onlyMarker := testBlockID(0), testBlockID(1), testBlockID(2), testBlockID(3), testBlockID(4), testBlockID(5)
	for _, id := range []BlockID{ok, torn, gone, flushing, tornFlushing} {
		require.NoError(t, WriteBlock(vfs.OS(), root, id, testBlockSize, genShards([]uint32{1}, 5, 10)))
		require.NoFileExists(t, blockFilePath(root, id, kindPending), "removed by Finish")
	}
	flipByte(t, blockFilePath(root, torn, kindCheckpoint), -1)
	require.NoError(t, os.Remove(blockFilePath(root, gone, kindCheckpoint)))
	// What a crash before the checkpoint leaves (with its marker), and a
	// stale marker beside a complete volume.
	for _, id := range []BlockID{ok, flushing, tornFlushing, onlyMarker} {
		require.NoError(t, markPending(vfs.OS(), root, id))
	}
	require.NoError(t, os.Remove(blockFilePath(root, flushing, kindCheckpoint)))
	flipByte(t, blockFilePath(root, tornFlushing, kindCheckpoint), -1)
	// A shard directory and a foreign file stay.
	require.NoError(t, os.MkdirAll(ShardDir(root, "default", 1), 0o755))
	foreign := filepath.Join(NamespaceDir(root, "default"), "fileset-1-2-info.db")
	require.NoError(t, os.WriteFile(foreign, nil, 0o644))

	n, damaged, err := ResolveIncompleteBlocks(vfs.OS(), root, "default")
	require.NoError(t, err)
	require.Equal(t, 2, n, "the two interrupted flushes")
	require.Len(t, damaged, 2)
	require.Equal(t, torn, damaged[0].ID)
	require.Equal(t, gone, damaged[1].ID)
	require.Len(t, damaged[0].Moved, 3)
	require.Len(t, damaged[1].Moved, 2, "data and index; the checkpoint was deleted")
	require.ErrorIs(t, damaged[1].Err, ErrCorrupt)
	require.Contains(t, damaged[1].Err.Error(), "checkpoint missing")
	for _, d := range damaged {
		for _, p := range d.Moved {
			require.True(t, strings.HasSuffix(p, CorruptSuffix))
			require.FileExists(t, p)
		}
	}
	ids, err := ListBlocks(vfs.OS(), root, "default")
	require.NoError(t, err)
	require.Equal(t, []BlockID{ok}, ids)
	require.FileExists(t, foreign)
	var left []string
	entries, err := os.ReadDir(NamespaceDir(root, "default"))
	require.NoError(t, err)
	for _, e := range entries {
		if !e.IsDir() && !strings.HasSuffix(e.Name(), CorruptSuffix) {
			left = append(left, e.Name())
		}
	}
	require.ElementsMatch(t, []string{"fileset-1-2-info.db", blockFileName(ok, kindData), blockFileName(ok, kindIndex), blockFileName(ok, kindCheckpoint)}, left,
		"interrupted flushes and every marker gone")

	moved, err := MoveBlockAside(vfs.OS(), root, ok)
	require.NoError(t, err)
	require.Len(t, moved, 3)
	ids, err = ListBlocks(vfs.OS(), root, "default")
	require.NoError(t, err)
	require.Empty(t, ids)
	for _, p := range moved {
		require.True(t, strings.HasSuffix(p, CorruptSuffix))
		require.FileExists(t, p)
	}
}

// TestBlockWriteFaults injects one fault per case into the write of volume
// 1 while volume 0 is on disk: the write fails with a wrapped error naming
// the volume, volume 1 is not listed and has no checkpoint, volume 0 is
// intact, and a retry succeeds. Five fsyncs per volume, whatever the
// number of shards.
func TestBlockWriteFaults(t *testing.T) {
	type fault struct {
		name      string
		op        vfs.Op
		file      string // base-name suffix; "/" for directories
		nth       int
		short     int
		wantInErr string
	}
	var cases []fault
	for _, k := range blockKinds {
		f := "-" + string(k) + ".db"
		cases = append(cases,
			fault{name: "create " + string(k), op: vfs.OpCreate, file: f, nth: 1, wantInErr: "create " + string(k)},
			fault{name: "write " + string(k), op: vfs.OpWrite, file: f, nth: 1, wantInErr: "write " + string(k)},
			fault{name: "short write " + string(k), op: vfs.OpWrite, file: f, nth: 1, short: 3, wantInErr: "write " + string(k)},
			fault{name: "sync " + string(k), op: vfs.OpSync, file: f, nth: 1, wantInErr: "sync"},
		)
	}
	cases = append(cases,
		fault{name: "short write mid data", op: vfs.OpWrite, file: "-data.db", nth: 3, short: 1000, wantInErr: "write data"},
		fault{name: "dir sync before checkpoint", op: vfs.OpSync, file: "/", nth: 1, wantInErr: "sync directory"},
		fault{name: "dir sync after checkpoint", op: vfs.OpSync, file: "/", nth: 2, wantInErr: "after checkpoint"},
	)
	shardList := make([]uint32, 64)
	for i := range shardList {
		shardList[i] = uint32(i * 61)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			prev, next := testBlockID(0), testBlockID(1)
			require.NoError(t, WriteBlock(vfs.OS(), root, prev, testBlockSize, genShards([]uint32{1, 2}, 100, 1000)))

			faulty := vfs.NewFaulty(vfs.OS())
			var seen atomic.Int32
			faulty.Set(func(op vfs.Op, path string, _ int) (bool, int) {
				match := op == tc.op && strings.HasSuffix(filepath.Base(path), tc.file)
				if tc.file == "/" {
					match = op == tc.op && !strings.HasSuffix(path, ".db")
				}
				if !match || int(seen.Add(1)) != tc.nth {
					return false, 0
				}
				return true, tc.short
			})
			shards := genShards(shardList, 20, 1000) // ~640 KB of data: several buffered writes
			err := WriteBlock(faulty, root, next, testBlockSize, shards)
			require.Error(t, err)
			require.ErrorIs(t, err, vfs.ErrInjected)
			require.Contains(t, err.Error(), next.String())
			require.Contains(t, err.Error(), tc.wantInErr)

			ids, err := ListBlocks(vfs.OS(), root, "default")
			require.NoError(t, err)
			require.Equal(t, []BlockID{prev}, ids)
			_, err = os.Stat(blockFilePath(root, next, kindCheckpoint))
			require.ErrorIs(t, err, os.ErrNotExist)
			v := openBlockTest(t, root, prev)
			require.NoError(t, v.Verify())

			var syncs atomic.Int32
			faulty.Set(func(op vfs.Op, _ string, _ int) (bool, int) {
				if op == vfs.OpSync {
					syncs.Add(1)
				}
				return false, 0
			})
			require.NoError(t, WriteBlock(faulty, root, next, testBlockSize, shards))
			require.EqualValues(t, 5, syncs.Load())
			v2 := openBlockTest(t, root, next)
			require.NoError(t, v2.Verify())
			require.Len(t, v2.Shards(), len(shardList))
		})
	}
}

// FuzzBlockIndexHead feeds arbitrary bytes, given a valid CRC, to the
// index head decoder and the section decoder: an error or a head whose
// every range lies inside the files, never a panic.
func FuzzBlockIndexHead(f *testing.F) {
	root := f.TempDir()
	id := testBlockID(0)
	if err := WriteBlock(vfs.OS(), root, id, testBlockSize, genShards([]uint32{1, 2, 3}, 10, 300)); err != nil {
		f.Fatal(err)
	}
	ix, err := os.ReadFile(blockFilePath(root, id, kindIndex))
	if err != nil {
		f.Fatal(err)
	}
	st, err := os.Stat(blockFilePath(root, id, kindData))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ix, false)
	f.Add(ix, true)
	old := filepath.Join(root, "v2")
	writeBlockIndexVersion(f, old, id, genShards([]uint32{1, 2, 3}, 10, 300), blockVersion)
	if ix2, err := os.ReadFile(blockFilePath(old, id, kindIndex)); err != nil {
		f.Fatal(err)
	} else {
		f.Add(ix2, true)
	}
	v3 := filepath.Join(root, "v3")
	writeBlockIndexVersion(f, v3, id, kindShards(), indexCompressed)
	if ix3, err := os.ReadFile(blockFilePath(v3, id, kindIndex)); err != nil {
		f.Fatal(err)
	} else {
		f.Add(ix3, true)
	}
	f.Add(ix[:len(ix)/2], true)
	cp, err := os.ReadFile(blockFilePath(root, id, kindCheckpoint))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(cp, false)
	f.Fuzz(func(t *testing.T, b []byte, fixCRC bool) {
		_, _ = decodeBlockCheckpoint("checkpoint", b)
		b = append([]byte(nil), b...)
		if fixCRC {
			// Reseal the head as the decoder will delimit it.
			resealHead(b)
		}
		h, err := decodeBlockIndexHead("index", b, int64(len(b)), st.Size())
		if err != nil {
			return
		}
		for _, s := range h.sections {
			if s.index.offset < h.size || s.index.offset+s.index.size > int64(len(b)) || s.data.offset < headerSize || s.data.offset+s.data.size > st.Size() {
				t.Fatalf("accepted section outside its files: %+v", s)
			}
			sb := b[s.index.offset : s.index.offset+s.index.size]
			if h.version >= indexCompressed {
				if sb, err = decompressSection(sb, 64<<10, nil); err != nil {
					continue
				}
			}
			d := newDecoder(sb)
			_, _, _, _ = decodeSection(&d, s.seriesCount, s.pageCount, s.data.offset, s.data.offset+s.data.size, h.version >= blockIndexVersion)
		}
	})
}

// TestRemoveBlockFaultLeavesIncomplete: a removal that fails after the
// checkpoint went leaves an incomplete volume, which ListBlocks ignores
// and ResolveIncompleteBlocks finishes (its pending marker says it is
// not damage); one failing on the checkpoint
// leaves the volume complete and readable.
func TestRemoveBlockFaultLeavesIncomplete(t *testing.T) {
	for _, tc := range []struct {
		file     string
		complete bool
	}{{"-checkpoint.db", true}, {"-data.db", false}, {"-index.db", false}} {
		t.Run(tc.file, func(t *testing.T) {
			root := t.TempDir()
			id := testBlockID(0)
			require.NoError(t, WriteBlock(vfs.OS(), root, id, testBlockSize, genShards([]uint32{1, 2}, 20, 100)))
			faulty := vfs.NewFaulty(vfs.OS())
			faulty.Set(func(op vfs.Op, path string, _ int) (bool, int) {
				return op == vfs.OpRemove && strings.HasSuffix(path, tc.file), 0
			})
			require.ErrorIs(t, RemoveBlock(faulty, root, id), vfs.ErrInjected)
			ids, err := ListBlocks(vfs.OS(), root, "default")
			require.NoError(t, err)
			if tc.complete {
				require.Equal(t, []BlockID{id}, ids)
				require.NoError(t, openBlockTest(t, root, id).Verify())
				return
			}
			require.Empty(t, ids)
			n, damaged, err := ResolveIncompleteBlocks(vfs.OS(), root, "default")
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.Empty(t, damaged, "an interrupted removal is not damage")
			entries, err := os.ReadDir(NamespaceDir(root, "default"))
			require.NoError(t, err)
			require.Empty(t, entries)
		})
	}
}

// FuzzOpenBlock replaces the index or checkpoint of a valid volume with
// the input (with fixSums, the checkpoint is rewritten to accept the new
// index, and the index head's CRC fixed, so the input reaches the section
// decoders) and opens every shard: an error or a reader that serves
// calls, never a panic.
func FuzzOpenBlock(f *testing.F) {
	seed := f.TempDir()
	id := testBlockID(0)
	shards := kindShards()
	if err := WriteBlock(vfs.OS(), seed, id, testBlockSize, shards); err != nil {
		f.Fatal(err)
	}
	valid := map[fileKind][]byte{}
	for _, k := range blockKinds {
		b, err := os.ReadFile(blockFilePath(seed, id, k))
		if err != nil {
			f.Fatal(err)
		}
		valid[k] = b
	}
	f.Add(false, valid[kindIndex], true)
	f.Add(false, valid[kindIndex][:len(valid[kindIndex])-7], true)
	f.Add(true, valid[kindCheckpoint], false)
	f.Fuzz(func(t *testing.T, checkpointFile bool, content []byte, fixSums bool) {
		root := t.TempDir()
		if err := os.MkdirAll(NamespaceDir(root, "default"), 0o755); err != nil {
			t.Fatal(err)
		}
		files := map[fileKind][]byte{kindData: valid[kindData], kindIndex: valid[kindIndex], kindCheckpoint: valid[kindCheckpoint]}
		if checkpointFile {
			files[kindCheckpoint] = content
		} else {
			ix := append([]byte(nil), content...)
			if fixSums {
				n, _ := resealHead(ix)
				files[kindCheckpoint] = encodeBlockCheckpoint(blockCheckpoint{
					id: id, shards: n,
					index: fileSum{size: int64(len(ix)), crc: crc32c(ix)},
					data:  fileSum{size: int64(len(valid[kindData])), crc: crc32c(valid[kindData])},
				})
			}
			files[kindIndex] = ix
		}
		for k, b := range files {
			if err := os.WriteFile(blockFilePath(root, id, k), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := ListBlocks(vfs.OS(), root, "default"); err != nil {
			t.Fatal(err)
		}
		v, err := OpenBlock(vfs.OS(), root, id, OpenOptions{Cache: NewPageCache(1 << 20)})
		if err != nil {
			return
		}
		defer v.Close()
		_ = v.Verify()
		for _, s := range v.Shards() {
			r, _, err := v.OpenShard(s)
			if err != nil {
				continue
			}
			holds, known := r.HoldsHistograms()
			hist := 0
			_ = r.RangeIndex(func(sid []byte, _ uint64, _, _ int) error {
				if k, _ := r.Kind(sid); k == KindHistograms {
					hist++
				} else if known != (k == KindFloats) {
					t.Fatalf("kind %d in an index that knows kinds: %v", k, known)
				}
				_, _, _ = r.Read(sid)
				return nil
			})
			if holds != (hist > 0) {
				t.Fatalf("HoldsHistograms %v with %d histogram series", holds, hist)
			}
			_ = r.RangeData(func(_, _ []byte) error { return nil })
			_ = r.Verify()
			_ = r.Close()
		}
	})
}

// FuzzDecodeReleased: any sealed input decodes to an error or to records
// that encode back to the same bytes.
func FuzzDecodeReleased(f *testing.F) {
	root := f.TempDir()
	if err := WriteReleased(vfs.OS(), root, "default", []Released{{Shard: 1, BlockStart: 7200000, Volume: 3}}); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(ReleasedPath(root, "default"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b[:len(b)-4])
	f.Fuzz(func(t *testing.T, body []byte) {
		rs, err := decodeReleased("released", seal(append([]byte(nil), body...)))
		if err != nil {
			return
		}
		dir := t.TempDir()
		if err := WriteReleased(vfs.OS(), dir, "default", rs); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(ReleasedPath(dir, "default"))
		if err != nil {
			t.Fatal(err)
		}
		if string(got[:len(got)-4]) != string(body) {
			t.Fatalf("released records do not round trip")
		}
	})
}
