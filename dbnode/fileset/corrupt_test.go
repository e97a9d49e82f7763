package fileset

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// replaceFile overwrites one file of a complete fileset with b. If fixSums,
// it then rewrites the digest and checkpoint so the checksum chain accepts
// the new bytes, which lets tests and the fuzzer reach the decoders behind
// the checksums.
func replaceFile(t testing.TB, root string, id ID, kind fileKind, b []byte, fixSums bool) {
	t.Helper()
	require.NoError(t, os.WriteFile(filePath(root, id, kind), b, 0o644))
	if !fixSums || kind == kindCheckpoint {
		return
	}
	sum := func(k fileKind) fileSum {
		b, err := os.ReadFile(filePath(root, id, k))
		require.NoError(t, err)
		return fileSum{size: int64(len(b)), crc: crc32c(b)}
	}
	if kind != kindDigest {
		dg := digest{info: sum(kindInfo), index: sum(kindIndex), data: sum(kindData)}
		require.NoError(t, os.WriteFile(filePath(root, id, kindDigest), encodeDigest(dg), 0o644))
	}
	cp := encodeCheckpoint(checkpoint{id: id, digest: sum(kindDigest)})
	require.NoError(t, os.WriteFile(filePath(root, id, kindCheckpoint), cp, 0o644))
}

func TestReadDetectsFlippedDataByte(t *testing.T) {
	root := t.TempDir()
	id := testID(0, 0)
	series := genSeries(2000, 1, 1000)
	writeTest(t, vfs.OS(), root, id, series)

	r := openTest(t, vfs.OS(), root, id)
	require.Greater(t, len(r.ix.pages), 3)
	bad := r.ix.pages[2]
	flipByte(t, filePath(root, id, kindData), bad.offset+int64(bad.clen)/2)

	r = openTest(t, vfs.OS(), root, id) // fresh reader: nothing cached
	for i, s := range series {
		data, ok, err := r.Read(s.ID)
		if r.ix.entries[i].page == 2 {
			require.ErrorIs(t, err, ErrCorrupt, "series %d", i)
			require.Contains(t, err.Error(), "checksum mismatch")
			require.Contains(t, err.Error(), "-data.db")
			require.False(t, ok)
			require.Nil(t, data)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, s.Data, data)
	}
	require.ErrorIs(t, r.Verify(), ErrCorrupt)
	require.ErrorIs(t, r.RangeData(func(_, _ []byte) error { return nil }), ErrCorrupt)
}

// TestReadDetectsPayloadChecksumMismatch corrupts the per-series checksum
// in the index (keeping the file checksums valid), so the page decodes but
// the payload must not be returned.
func TestReadDetectsPayloadChecksumMismatch(t *testing.T) {
	root := t.TempDir()
	id := testID(0, 0)
	series := genSeries(10, 1, 100)
	writeTest(t, vfs.OS(), root, id, series)
	b, err := os.ReadFile(filePath(root, id, kindIndex))
	require.NoError(t, err)
	// The last entry's checksum is the 8 bytes before the trailer.
	last := len(b) - 4 - 8
	binary.LittleEndian.PutUint64(b[last:], binary.LittleEndian.Uint64(b[last:])^1)
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32c(b[:len(b)-4]))
	replaceFile(t, root, id, kindIndex, b, true)

	r := openTest(t, vfs.OS(), root, id)
	_, ok, err := r.Read(series[len(series)-1].ID)
	require.ErrorIs(t, err, ErrCorrupt)
	require.Contains(t, err.Error(), "payload checksum mismatch")
	require.False(t, ok)
	got, ok, err := r.Read(series[0].ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, series[0].Data, got)
}

// TestOpenDetectsDamagedFiles damages each file in several ways and checks
// that Open fails with an error naming the file.
func TestOpenDetectsDamagedFiles(t *testing.T) {
	type damage struct {
		name string
		do   func(t *testing.T, path string)
	}
	damages := []damage{
		{"flip first byte", func(t *testing.T, p string) { flipByte(t, p, 0) }},
		{"flip middle byte", func(t *testing.T, p string) {
			st, err := os.Stat(p)
			require.NoError(t, err)
			flipByte(t, p, st.Size()/2)
		}},
		{"flip last byte", func(t *testing.T, p string) { flipByte(t, p, -1) }},
		{"truncate by one", func(t *testing.T, p string) {
			st, err := os.Stat(p)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(p, st.Size()-1))
		}},
		{"empty", func(t *testing.T, p string) { require.NoError(t, os.Truncate(p, 0)) }},
		{"append", func(t *testing.T, p string) {
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.Write([]byte{0})
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}},
		{"delete", func(t *testing.T, p string) { require.NoError(t, os.Remove(p)) }},
	}
	for _, k := range kinds {
		for _, d := range damages {
			if k == kindData && (d.name == "flip middle byte" || d.name == "flip last byte") {
				continue // inside a page: found by Read and Verify, not Open (see above)
			}
			t.Run(string(k)+"/"+d.name, func(t *testing.T) {
				root := t.TempDir()
				id := testID(0, 0)
				writeTest(t, vfs.OS(), root, id, genSeries(200, 1, 1000))
				path := filePath(root, id, k)
				d.do(t, path)
				r, err := Open(vfs.OS(), root, id)
				require.Error(t, err)
				require.Nil(t, r)
				require.True(t, errors.Is(err, ErrCorrupt) || errors.Is(err, fs.ErrNotExist), "%v", err)
				require.Contains(t, err.Error(), "-"+string(k)+".db")
			})
		}
	}
}

// TestOpenDetectsInconsistentFilesets swaps in valid files of another
// fileset, with a consistent checksum chain, which only the cross checks
// between info, index and data can catch.
func TestOpenDetectsInconsistentFilesets(t *testing.T) {
	for _, k := range []fileKind{kindInfo, kindIndex, kindData} {
		t.Run(string(k), func(t *testing.T) {
			root := t.TempDir()
			a, b := testID(0, 0), testID(0, 1)
			writeTest(t, vfs.OS(), root, a, genSeries(300, 1, 1000))
			writeTest(t, vfs.OS(), root, b, genSeries(200, 2, 1000))
			other, err := os.ReadFile(filePath(root, b, k))
			require.NoError(t, err)
			replaceFile(t, root, a, k, other, true)
			_, err = Open(vfs.OS(), root, a)
			require.ErrorIs(t, err, ErrCorrupt)
			t.Log(err)
		})
	}
}
