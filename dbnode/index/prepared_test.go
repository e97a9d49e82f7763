package index

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/ident"
)

// TestPreparedBatchMatchesInsert: batches prepared on several goroutines
// and added in order build what InsertNewTagged of each series in turn
// builds: the same series, postings, label names and values, and tags
// (the last non-zero wins), over series new and known, repeats within a
// batch, several blocks in one batch, label sets that differ in names and
// order of names, empty values, malformed IDs, and a block dropped by
// retention half way.
func TestPreparedBatchMatchesInsert(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 2))
	names := []string{"__name__", "a", "group", "instance", "job", "pod", "zz"}
	var pool [][]byte
	for i := range 600 {
		var kv []string
		for j, n := range names {
			if (i+j)%5 == 3 && n != "__name__" {
				continue // label sets differ
			}
			v := fmt.Sprintf("%s-%d", n, i%(j*7+2))
			switch {
			case n == "pod":
				v = fmt.Sprintf("pod-%d", i) // unique
			case n == "zz" && i%11 == 0:
				v = "" // not indexed
			}
			kv = append(kv, n, v)
		}
		pool = append(pool, ident.FromLabels(labels.FromStrings(kv...)))
	}
	type ins struct {
		id  string
		bs  int64
		tag uint32
	}
	var all []ins
	for range 4000 {
		in := ins{id: string(pool[rng.IntN(len(pool))]), bs: int64(rng.IntN(3)) * 10, tag: uint32(rng.IntN(4))}
		if rng.IntN(100) == 0 {
			// malformed: cut, unsorted names, an empty name
			in.id = []string{"\xff\xff", "\x01b\x01x\x01a\x01y", "\x01a\x01x\x00\x01y"}[rng.IntN(3)]
		}
		all = append(all, in)
	}
	want, got := New(10), New(10)
	got.ReserveSeries(len(pool)) // a sizing hint only
	// In two halves, retention dropping block 0 between them.
	for half, part := range [][]ins{all[:2000], all[2000:]} {
		if half == 1 {
			want.DropBlocksBefore(10)
			got.DropBlocksBefore(10)
		}
		var wantErrs, gotErrs int
		for _, in := range part {
			if err := want.InsertNewTagged(in.id, in.bs, in.tag); err != nil {
				require.ErrorIs(t, err, ident.ErrMalformedID)
				wantErrs++
			}
		}
		// Batches of varied sizes, prepared concurrently, added in order.
		var batches []*PreparedBatch
		var spans [][]ins
		for lo := 0; lo < len(part); {
			hi := min(len(part), lo+1+rng.IntN(300))
			batches, spans = append(batches, &PreparedBatch{}), append(spans, part[lo:hi])
			lo = hi
		}
		errs := make([]int, len(batches))
		var wg sync.WaitGroup
		for i := range batches {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, in := range spans[i] {
					if err := got.PrepareNewTagged(batches[i], in.id, in.bs, in.tag); err != nil {
						errs[i]++
					}
				}
			}()
		}
		wg.Wait()
		for i, b := range batches {
			gotErrs += errs[i]
			require.NoError(t, got.AddPreparedBatch(b))
		}
		require.Equal(t, wantErrs, gotErrs)
	}
	require.Equal(t, want.NumSeries(), got.NumSeries())
	for _, r := range [][2]int64{{0, 9}, {10, 19}, {20, 29}, {0, 29}} {
		wn, err := want.LabelNames(nil, r[0], r[1])
		require.NoError(t, err)
		gn, err := got.LabelNames(nil, r[0], r[1])
		require.NoError(t, err)
		require.Equal(t, wn, gn, "%v", r)
		for _, n := range names {
			wv, err := want.LabelValues(n, nil, r[0], r[1])
			require.NoError(t, err)
			gv, err := got.LabelValues(n, nil, r[0], r[1])
			require.NoError(t, err)
			require.Equal(t, wv, gv, "%s %v", n, r)
			for _, v := range append(wv, "") {
				ms := []*labels.Matcher{mt(t, n, "=", v)}
				wids, wtags, err := want.QueryTagged(ms, r[0], r[1])
				require.NoError(t, err)
				gids, gtags, err := got.QueryTagged(ms, r[0], r[1])
				require.NoError(t, err)
				require.Equal(t, asStrings(wids), asStrings(gids), "%s=%q %v", n, v, r)
				require.Equal(t, wtags, gtags, "%s=%q %v", n, v, r)
			}
		}
	}
}

// TestPreparedBatchRefusesOtherIndex: a batch holds one index's series.
func TestPreparedBatchRefusesOtherIndex(t *testing.T) {
	a, b := New(10), New(10)
	var pb PreparedBatch
	require.NoError(t, a.PrepareNewTagged(&pb, string(sid("a", "1")), 0, 0))
	require.ErrorIs(t, b.PrepareNewTagged(&pb, string(sid("a", "2")), 0, 0), errOtherIndex)
	require.ErrorIs(t, b.AddPreparedBatch(&pb), errOtherIndex)
	pb.Reset()
	require.NoError(t, b.PrepareNewTagged(&pb, string(sid("a", "2")), 0, 0))
	require.NoError(t, b.AddPreparedBatch(&pb))
	require.Equal(t, 1, b.NumSeries())
}

// TestPreparedBatchBesideRetentionAndWrites: AddPreparedBatch alongside
// live inserts, queries and DropBlocksBefore (run it with -race): no
// race, and every series inserted into a block retention keeps is found.
func TestPreparedBatchBesideRetentionAndWrites(t *testing.T) {
	ix := New(10)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(2)
	go func() { // retention, moving forward
		defer wg.Done()
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ix.DropBlocksBefore(i % 50)
		}
	}()
	go func() { // live writes and queries into the kept block
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			require.NoError(t, ix.InsertTagged(string(sid("k", fmt.Sprint(i%300), "w", "live")), 1000, 7))
			_, err := ix.Query([]*labels.Matcher{mt(t, "w", "=", "live")}, 1000, 1009)
			require.NoError(t, err)
		}
	}()
	var pb PreparedBatch
	for round := range 40 {
		pb.Reset()
		for i := range 200 {
			bs := int64(i%6) * 10 // into blocks being dropped
			if i%4 == 0 {
				bs = 1000 // and the kept one
			}
			require.NoError(t, ix.PrepareNewTagged(&pb, string(sid("k", fmt.Sprint(i%300), "r", fmt.Sprint(round))), bs, 9))
		}
		require.NoError(t, ix.AddPreparedBatch(&pb))
	}
	close(stop)
	wg.Wait()
	for round := range 40 {
		ids, err := ix.Query([]*labels.Matcher{mt(t, "r", "=", fmt.Sprint(round))}, 1000, 1009)
		require.NoError(t, err)
		require.Len(t, ids, 50, "round %d", round)
	}
}
