package index

import (
	"testing"
	"unsafe"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

// storedID returns the index's stored ID string of id.
func storedID(t *testing.T, ix *Index, id []byte) string {
	t.Helper()
	h := ix.series.hash(id)
	st := ix.series.stripeOf(h)
	st.mu.RLock()
	defer st.mu.RUnlock()
	ref, ok := ix.series.find(st, h, id)
	require.True(t, ok, "%q not in the index", id)
	return ix.series.id(ref)
}

// InsertString keeps the caller's string for a series new to the index;
// Insert copies; a series already present keeps its first string; and the
// shared ID answers queries like a copied one.
func TestInsertStringSharesTheID(t *testing.T) {
	ix := New(1000)
	shared := string(sid("__name__", "up", "job", "a"))
	require.NoError(t, ix.InsertString(shared, 0))
	require.Equal(t, uintptr(unsafe.Pointer(unsafe.StringData(shared))), uintptr(unsafe.Pointer(unsafe.StringData(storedID(t, ix, []byte(shared))))), "not shared")

	again := string(sid("__name__", "up", "job", "a"))
	require.NoError(t, ix.InsertString(again, 1000))
	require.Equal(t, uintptr(unsafe.Pointer(unsafe.StringData(shared))), uintptr(unsafe.Pointer(unsafe.StringData(storedID(t, ix, []byte(again))))), "the first string stays")

	copied := sid("__name__", "up", "job", "b")
	require.NoError(t, ix.Insert(copied, 0))
	require.NotEqual(t, uintptr(unsafe.Pointer(unsafe.SliceData(copied))), uintptr(unsafe.Pointer(unsafe.StringData(storedID(t, ix, copied)))), "Insert retained its argument")

	ids, err := ix.Query([]*labels.Matcher{mt(t, "__name__", "=", "up")}, 0, 1999)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{shared, string(copied)}, asStrings(ids))

	require.Error(t, ix.InsertString("not an ID", 0), "InsertString validates like Insert")
}
