package index

import (
	"fmt"
	"hash/crc32"
	"strconv"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

// QueryTagged returns Query's IDs, each with the last non-zero tag an
// insert gave it, also when the sort splits between goroutines and
// merges; a ref freed by retention and reused forgets its old ID's tag.
func TestQueryTaggedKeepsTagsWithIDs(t *testing.T) {
	defer func(n int) { parallelSortMin = n }(parallelSortMin)
	parallelSortMin = 4
	const blockSize = 1000
	ix := New(blockSize)
	tagOf := func(id string) uint32 { return crc32.ChecksumIEEE([]byte(id)) | 1 }
	const n = 500
	for i := range n {
		id := string(sid("__name__", "m", "i", fmt.Sprintf("%x", i*7919%n)))
		require.NoError(t, ix.InsertTagged(id, 0, tagOf(id)))
		if i%3 == 0 {
			require.NoError(t, ix.InsertTagged(id, blockSize, 0)) // 0 keeps the tag
		}
	}
	ms := []*labels.Matcher{mt(t, "__name__", "=", "m")}
	check := func(tag func(string) uint32) [][]byte {
		t.Helper()
		want, err := ix.Query(ms, 0, 2*blockSize)
		require.NoError(t, err)
		ids, tags, err := ix.QueryTagged(ms, 0, 2*blockSize)
		require.NoError(t, err)
		require.Equal(t, want, ids)
		require.Len(t, tags, len(ids))
		for i, id := range ids {
			require.Equal(t, tag(string(id)), tags[i], "%q", id)
		}
		return ids
	}
	ids := check(tagOf)
	require.Len(t, ids, n)

	// A later tag replaces the recorded one.
	retag := func(id string) uint32 { return tagOf(id) + 2 }
	for _, id := range ids {
		require.NoError(t, ix.InsertTagged(string(id), 0, retag(string(id))))
	}
	check(retag)

	// Block 0 dropped, it frees the refs of the IDs only in it (two in
	// three); new IDs inserted without a tag take them and have none.
	ix.DropBlocksBefore(blockSize)
	fresh := map[string]bool{}
	for i := range n {
		id := sid("__name__", "m", "j", strconv.Itoa(i))
		fresh[string(id)] = true
		require.NoError(t, ix.Insert(id, blockSize))
	}
	require.Len(t, check(func(id string) uint32 {
		if fresh[id] {
			return 0
		}
		return retag(id)
	}), n-n*2/3+n)
}
