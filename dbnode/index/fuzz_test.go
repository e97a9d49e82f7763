package index

import (
	"errors"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/ident"
)

// FuzzInsert feeds arbitrary bytes as IDs: Insert must either reject them as
// malformed or index them so that exactly that ID comes back.
func FuzzInsert(f *testing.F) {
	f.Add(sid("__name__", "up", "job", "x"))
	f.Add([]byte{0x01, 'a', 0x00})
	f.Add([]byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, id []byte) {
		ix := New(10)
		err := ix.Insert(id, 0)
		if err != nil {
			require.True(t, errors.Is(err, ident.ErrMalformedID), "%v", err)
			require.Zero(t, ix.NumSeries())
			return
		}
		got, err := ix.Query(nil, 0, 9)
		require.NoError(t, err)
		require.Equal(t, [][]byte{id}, got)
		names, err := ix.LabelNames(nil, 0, 9)
		require.NoError(t, err)
		ls, err := ident.Labels(id)
		require.NoError(t, err)
		want := []string{}
		ls.Range(func(l labels.Label) {
			if l.Value != "" {
				want = append(want, l.Name)
			}
		})
		require.Equal(t, want, names)
	})
}

// FuzzLoader: two arbitrary IDs loaded in bulk (the second also into a
// second block) are rejected as malformed or indexed exactly as Insert
// indexes them.
func FuzzLoader(f *testing.F) {
	f.Add(sid("__name__", "up", "job", "x"), sid("__name__", "up", "job", "y"))
	f.Add(sid("a", "1"), sid("a", "1"))
	f.Add([]byte{0x01, 'a', 0x00}, []byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		loaded, inserted := New(10), New(10)
		l := loaded.NewLoader()
		for _, in := range []struct {
			id []byte
			bs int64
		}{{a, 0}, {b, 0}, {b, 10}} {
			lerr := l.AddString(string(in.id), in.bs)
			ierr := inserted.Insert(in.id, in.bs)
			require.Equal(t, ierr == nil, lerr == nil, "insert: %v, load: %v", ierr, lerr)
			if lerr != nil {
				require.True(t, errors.Is(lerr, ident.ErrMalformedID), "%v", lerr)
			}
		}
		require.NoError(t, l.Finish())
		require.Equal(t, inserted.NumSeries(), loaded.NumSeries())
		for _, r := range [][2]int64{{0, 9}, {10, 19}, {0, 19}} {
			want, err := inserted.Query(nil, r[0], r[1])
			require.NoError(t, err)
			got, err := loaded.Query(nil, r[0], r[1])
			require.NoError(t, err)
			require.Equal(t, asStrings(want), asStrings(got))
			wn, err := inserted.LabelNames(nil, r[0], r[1])
			require.NoError(t, err)
			gn, err := loaded.LabelNames(nil, r[0], r[1])
			require.NoError(t, err)
			require.Equal(t, wn, gn)
			for _, n := range wn {
				wv, err := inserted.LabelValues(n, nil, r[0], r[1])
				require.NoError(t, err)
				gv, err := loaded.LabelValues(n, nil, r[0], r[1])
				require.NoError(t, err)
				require.Equal(t, wv, gv, "values of %q", n)
			}
		}
	})
}
