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
