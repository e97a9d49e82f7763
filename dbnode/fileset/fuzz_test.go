package fileset

import (
	"bytes"
	"os"
	"testing"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// FuzzOpen starts from a valid fileset, replaces one of its files with the
// fuzz input and opens it. With fixSums the input is taken as the file's
// body: the harness appends its CRC trailer and rewrites the digest and
// checkpoint to match, so the input reaches the info/index/digest/checkpoint
// decoders and their cross checks instead of stopping at a checksum. Open
// must return an error or a reader that serves calls without panicking.
func FuzzOpen(f *testing.F) {
	seedRoot := f.TempDir()
	id := testID(0, 0)
	series := genSeries(20, 1, 300)
	if err := Write(vfs.OS(), seedRoot, id, testBlockSize, series); err != nil {
		f.Fatal(err)
	}
	valid := map[fileKind][]byte{}
	for i, k := range kinds {
		b, err := os.ReadFile(filePath(seedRoot, id, k))
		if err != nil {
			f.Fatal(err)
		}
		valid[k] = b
		f.Add(uint8(i), b, false)
		body := b
		if k != kindData {
			body = b[:len(b)-4]
		}
		f.Add(uint8(i), body, true)
		f.Add(uint8(i), body[:len(body)/2], true)
	}
	f.Fuzz(func(t *testing.T, which uint8, content []byte, fixSums bool) {
		root := t.TempDir()
		if err := os.MkdirAll(ShardDir(root, id.Namespace, id.Shard), 0o755); err != nil {
			t.Fatal(err)
		}
		for k, b := range valid {
			if err := os.WriteFile(filePath(root, id, k), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		kind := kinds[int(which)%len(kinds)]
		if fixSums && kind != kindData {
			content = seal(append([]byte(nil), content...))
		}
		replaceFile(t, root, id, kind, content, fixSums)

		if _, err := List(vfs.OS(), root, id.Namespace, id.Shard); err != nil {
			t.Fatal(err)
		}
		r, err := OpenWith(vfs.OS(), root, id, OpenOptions{Cache: NewPageCache(1 << 20)})
		if err != nil {
			return
		}
		defer r.Close()
		// A reader that opened must serve calls without panicking; errors
		// are fine (a data file of the right size may still be bad).
		_ = r.RangeIndex(func(seriesID []byte, _ uint64, _, _ int) error {
			_, _, _ = r.Read(seriesID)
			return nil
		})
		_ = r.RangeData(func(_, _ []byte) error { return nil })
		_ = r.Verify()
		for _, s := range series[:3] {
			_, _, _ = r.Read(s.ID)
		}
	})
}

// FuzzDecode feeds the input, sealed with a valid trailer, straight to the
// decoders of the small files and the index: the same code FuzzOpen reaches,
// without the file system, so it runs orders of magnitude more inputs.
func FuzzDecode(f *testing.F) {
	root := f.TempDir()
	id := testID(0, 0)
	if err := Write(vfs.OS(), root, id, testBlockSize, genSeries(20, 1, 300)); err != nil {
		f.Fatal(err)
	}
	for i, k := range kinds {
		b, err := os.ReadFile(filePath(root, id, k))
		if err != nil {
			f.Fatal(err)
		}
		if k != kindData {
			f.Add(uint8(i), b[:len(b)-4])
		}
	}
	infoBytes, err := os.ReadFile(filePath(root, id, kindInfo))
	if err != nil {
		f.Fatal(err)
	}
	in, err := decodeInfo("info", infoBytes)
	if err != nil {
		f.Fatal(err)
	}
	dataSize := int64(0)
	if st, err := os.Stat(filePath(root, id, kindData)); err == nil {
		dataSize = st.Size()
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		b := seal(append([]byte(nil), body...))
		switch kinds[int(which)%len(kinds)] {
		case kindInfo:
			got, err := decodeInfo("info", b)
			if err == nil && !bytes.Equal(encodeInfo(got), b) {
				t.Fatalf("info does not round trip")
			}
		case kindDigest:
			got, err := decodeDigest("digest", b)
			if err == nil && !bytes.Equal(encodeDigest(got), b) {
				t.Fatalf("digest does not round trip")
			}
		case kindCheckpoint:
			got, err := decodeCheckpoint("checkpoint", b)
			if err == nil && !bytes.Equal(encodeCheckpoint(got), b) {
				t.Fatalf("checkpoint does not round trip")
			}
		default:
			ix, err := decodeIndex("index", b, in, dataSize)
			if err != nil {
				return
			}
			for i, e := range ix.entries {
				p := ix.pages[e.page]
				if uint64(e.off)+uint64(e.size) > uint64(p.ulen) || i > 0 && bytes.Compare(ix.id(i-1), ix.id(i)) >= 0 {
					t.Fatalf("accepted index with entry %d outside its page or out of order", i)
				}
			}
		}
	})
}
