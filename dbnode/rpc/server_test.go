package rpc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestWriteFetchRoundTrip(t *testing.T) {
	db := openStorage(t, commitlog.ModeSync)
	c := serve(t, db, nil, ServerOptions{NodeID: "node1"}, ClientOptions{})
	ctx := context.Background()

	ids := [][]byte{
		seriesID("cpu", "host", "a"),
		seriesID("cpu", "host", "b"),
		seriesID("mem", "host", "a"),
	}
	want := map[string][]Sample{}
	req := &WriteRequest{Namespace: testNS}
	for i, id := range ids {
		s := samplesNearNow(10, float64(i*100))
		s[3].V = math.NaN() // any float64 survives
		want[string(id)] = s
		req.Series = append(req.Series, writeSeries(id, s))
	}
	resp, err := writeReq(ctx, c, req)
	require.NoError(t, err)
	require.Equal(t, WriteResult{Written: 30}, resp)

	requireSamples := func(t *testing.T, want, got []Sample) {
		t.Helper()
		require.Len(t, got, len(want))
		for i := range want {
			require.Equal(t, want[i].T, got[i].T)
			require.Equal(t, math.Float64bits(want[i].V), math.Float64bits(got[i].V))
		}
	}
	start, end := time.Now().Add(-time.Hour).UnixMilli(), time.Now().UnixMilli()

	t.Run("Fetch", func(t *testing.T) {
		missing := seriesID("cpu", "host", "zzz")
		fr, err := c.Fetch(ctx, &FetchRequest{Namespace: testNS, IDs: [][]byte{ids[2], missing, ids[0]}, Start: start, End: end})
		require.NoError(t, err)
		require.Len(t, fr.Series, 3, "one answer per ID, in order")
		require.Equal(t, ids[2], fr.Series[0].ID)
		require.Equal(t, shardOf(ids[2]), fr.Series[0].Shard)
		requireSamples(t, want[string(ids[2])], decodeStream(t, fr.Series[0].Stream))
		require.Equal(t, missing, fr.Series[1].ID)
		require.Empty(t, fr.Series[1].Stream)
		requireSamples(t, want[string(ids[0])], decodeStream(t, fr.Series[2].Stream))
	})
	t.Run("Fetch narrows to the range", func(t *testing.T) {
		w := want[string(ids[0])]
		fr, err := c.Fetch(ctx, &FetchRequest{Namespace: testNS, IDs: [][]byte{ids[0]}, Start: w[2].T, End: w[5].T})
		require.NoError(t, err)
		requireSamples(t, w[2:6], decodeStream(t, fr.Series[0].Stream))
	})

	tagged := []struct {
		name     string
		matchers []Matcher
		shards   []uint32
		want     [][]byte
	}{
		{"equal", []Matcher{{uint8(labels.MatchEqual), "__name__", "cpu"}}, nil, ids[:2]},
		{"regex", []Matcher{{uint8(labels.MatchRegexp), "host", "a|b"}}, nil, ids},
		{"not equal", []Matcher{{uint8(labels.MatchEqual), "host", "a"}, {uint8(labels.MatchNotEqual), "__name__", "cpu"}}, nil, ids[2:]},
		{"explicit shards", []Matcher{{uint8(labels.MatchRegexp), "host", ".+"}}, []uint32{shardOf(ids[1])}, [][]byte{ids[1]}},
		{"no match", []Matcher{{uint8(labels.MatchEqual), "__name__", "nope"}}, nil, nil},
	}
	for _, tc := range tagged {
		t.Run("FetchTagged "+tc.name, func(t *testing.T) {
			fr, err := c.FetchTagged(ctx, &FetchTaggedRequest{Namespace: testNS, Matchers: tc.matchers, Start: start, End: end, Shards: tc.shards})
			require.NoError(t, err)
			var got [][]byte
			for _, s := range fr.Series {
				got = append(got, s.ID)
				require.Equal(t, shardOf(s.ID), s.Shard)
				requireSamples(t, want[string(s.ID)], decodeStream(t, s.Stream))
			}
			require.ElementsMatch(t, tc.want, got)
		})
	}
}

func TestHealth(t *testing.T) {
	db := openStorage(t, commitlog.ModeAsync)
	var mu sync.Mutex
	ready, msg := false, "bootstrapping 3 shards"
	c := serve(t, db, nil, ServerOptions{NodeID: "node7", Ready: func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return ready, msg
	}}, ClientOptions{})
	resp, err := c.Health(context.Background())
	require.NoError(t, err)
	require.Equal(t, &HealthResponse{NodeID: "node7", Ready: false, Message: "bootstrapping 3 shards"}, resp)

	mu.Lock()
	ready, msg = true, ""
	mu.Unlock()
	resp, err = c.Health(context.Background())
	require.NoError(t, err)
	require.Equal(t, &HealthResponse{NodeID: "node7", Ready: true}, resp)
}

// requireCode checks the code and message of a client error and returns it.
func requireCode(t *testing.T, err error, code codes.Code, msg string) *Error {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, status.Code(err), "error: %v", err)
	require.Contains(t, err.Error(), msg)
	var e *Error
	require.ErrorAs(t, err, &e)
	return e
}

func TestOwnershipRefusal(t *testing.T) {
	db := openStorage(t, commitlog.ModeAsync)
	ids := idsInDistinctShards(6)
	owned := shardOf(ids[0])
	c := serve(t, db, ownsOnly(owned), ServerOptions{NodeID: "node1"}, ClientOptions{})
	all := serve(t, db, nil, ServerOptions{}, ClientOptions{}) // same storage, no refusals: to look inside
	ctx := context.Background()
	start, end := time.Now().Add(-time.Hour).UnixMilli(), time.Now().UnixMilli()

	t.Run("write with one foreign shard writes nothing", func(t *testing.T) {
		req := &WriteRequest{Namespace: testNS, Series: []WriteSeries{
			writeSeries(ids[0], samplesNearNow(3, 1)),
			writeSeries(ids[1], samplesNearNow(3, 1)),
		}}
		_, err := writeReq(ctx, c, req)
		e := requireCode(t, err, codes.FailedPrecondition, fmt.Sprintf("write refused: shard %d: not owned by node2", shardOf(ids[1])))
		require.Equal(t, []uint32{shardOf(ids[1])}, e.Shards)
		require.Equal(t, "WriteBatch", e.Method)
		require.Contains(t, err.Error(), "node 127.0.0.1:")

		fr, err := all.Fetch(ctx, &FetchRequest{Namespace: testNS, IDs: ids[:2], Start: start, End: end})
		require.NoError(t, err)
		require.Empty(t, fr.Series[0].Stream, "the owned series of a refused batch must not be written")
		require.Empty(t, fr.Series[1].Stream)
	})
	t.Run("write naming many shards lists the first few and all in Shards", func(t *testing.T) {
		req := &WriteRequest{Namespace: testNS}
		var foreign []uint32
		for _, id := range ids[1:] {
			req.Series = append(req.Series, writeSeries(id, samplesNearNow(1, 1)))
			foreign = append(foreign, shardOf(id))
		}
		_, err := writeReq(ctx, c, req)
		e := requireCode(t, err, codes.FailedPrecondition, "; and 2 more shards")
		require.Equal(t, foreign, e.Shards)
	})
	t.Run("fetch of a foreign series", func(t *testing.T) {
		_, err := c.Fetch(ctx, &FetchRequest{Namespace: testNS, IDs: [][]byte{ids[0], ids[2]}, Start: start, End: end})
		e := requireCode(t, err, codes.FailedPrecondition, fmt.Sprintf("read refused: shard %d: not owned by node2", shardOf(ids[2])))
		require.Equal(t, []uint32{shardOf(ids[2])}, e.Shards)
	})

	// Data in every shard, written through the unrestricted server.
	req := &WriteRequest{Namespace: testNS}
	for _, id := range ids {
		req.Series = append(req.Series, writeSeries(id, samplesNearNow(2, 1)))
	}
	_, err := writeReq(ctx, all, req)
	require.NoError(t, err)
	match := []Matcher{{uint8(labels.MatchEqual), "__name__", "cpu"}}

	t.Run("fetch tagged of explicit foreign shards", func(t *testing.T) {
		_, err := c.FetchTagged(ctx, &FetchTaggedRequest{Namespace: testNS, Matchers: match, Start: start, End: end,
			Shards: []uint32{owned, shardOf(ids[3])}})
		requireCode(t, err, codes.FailedPrecondition, fmt.Sprintf("read refused: shard %d: not owned by node2", shardOf(ids[3])))
	})
	t.Run("fetch tagged of all shards answers for owned ones", func(t *testing.T) {
		fr, err := c.FetchTagged(ctx, &FetchTaggedRequest{Namespace: testNS, Matchers: match, Start: start, End: end})
		require.NoError(t, err)
		require.Len(t, fr.Series, 1)
		require.Equal(t, ids[0], fr.Series[0].ID)
	})
	t.Run("reads may be allowed where writes are not", func(t *testing.T) {
		leaving := ownFunc(func(shard uint32, op Op) error {
			if op == OpWrite {
				return fmt.Errorf("LEAVING")
			}
			return nil
		})
		lc := serve(t, db, leaving, ServerOptions{}, ClientOptions{})
		fr, err := lc.FetchTagged(ctx, &FetchTaggedRequest{Namespace: testNS, Matchers: match, Start: start, End: end})
		require.NoError(t, err)
		require.Len(t, fr.Series, len(ids))
		_, err = writeReq(ctx, lc, &WriteRequest{Namespace: testNS, Series: []WriteSeries{writeSeries(ids[0], samplesNearNow(1, 1))}})
		requireCode(t, err, codes.FailedPrecondition, fmt.Sprintf("shard %d: LEAVING", owned))
	})
}

func TestRejectedSamplesAreNotAnError(t *testing.T) {
	db := openStorage(t, commitlog.ModeSync)
	c := serve(t, db, nil, ServerOptions{}, ClientOptions{})
	id := seriesID("cpu", "host", "a")
	now := time.Now()
	samples := []Sample{
		{T: now.Add(-72 * time.Hour).UnixMilli(), V: 1}, // beyond retention
		{T: now.Add(-time.Minute).UnixMilli(), V: 2},
		{T: now.Add(time.Hour).UnixMilli(), V: 3}, // beyond buffer future
	}
	resp, err := writeReq(context.Background(), c, &WriteRequest{Namespace: testNS, Series: []WriteSeries{writeSeries(id, samples)}})
	require.NoError(t, err)
	require.Equal(t, 1, resp.Written)
	require.Equal(t, 2, resp.Rejected)
	require.Contains(t, resp.RejectMsg, "2 samples rejected")

	fr, err := c.Fetch(context.Background(), &FetchRequest{Namespace: testNS, IDs: [][]byte{id}, Start: 0, End: math.MaxInt64})
	require.NoError(t, err)
	require.Equal(t, []Sample{samples[1]}, decodeStream(t, fr.Series[0].Stream))
}

func TestInvalidRequests(t *testing.T) {
	db := openStorage(t, commitlog.ModeAsync)
	c := serve(t, db, nil, ServerOptions{}, ClientOptions{})
	ctx := context.Background()
	id := seriesID("cpu")
	eq := []Matcher{{uint8(labels.MatchEqual), "__name__", "cpu"}}
	cases := []struct {
		name string
		call func() error
		msg  string
	}{
		{"write unknown namespace", func() error {
			_, err := writeReq(ctx, c, &WriteRequest{Namespace: "nope", Series: []WriteSeries{writeSeries(id, samplesNearNow(1, 0))}})
			return err
		}, `unknown namespace "nope"`},
		{"write wrong shard", func() error {
			ws := writeSeries(id, samplesNearNow(1, 0))
			ws.Shard = (ws.Shard + 1) % testShards
			_, err := writeReq(ctx, c, &WriteRequest{Namespace: testNS, Series: []WriteSeries{ws}})
			return err
		}, fmt.Sprintf("but its ID hashes to shard %d", shardOf(id))},
		{"write empty id", func() error {
			_, err := writeReq(ctx, c, &WriteRequest{Namespace: testNS, Series: []WriteSeries{{Samples: samplesNearNow(1, 0)}}})
			return err
		}, "series 0: series has no labels"},
		{"write unsorted labels", func() error {
			id := []byte("\x01b\x011\x01a\x012") // b="1", a="2": length-prefixed, not sorted
			_, err := writeReq(ctx, c, &WriteRequest{Namespace: testNS, Series: []WriteSeries{writeSeries(id, samplesNearNow(1, 0))}})
			return err
		}, `label "a" not sorted after "b"`},
		{"write garbage id", func() error {
			_, err := writeReq(ctx, c, &WriteRequest{Namespace: testNS, Series: []WriteSeries{writeSeries([]byte{0xff}, samplesNearNow(1, 0))}})
			return err
		}, "malformed series id"},
		{"fetch unknown namespace", func() error {
			_, err := c.Fetch(ctx, &FetchRequest{Namespace: "nope", IDs: [][]byte{id}})
			return err
		}, `unknown namespace "nope"`},
		{"fetch start after end", func() error {
			_, err := c.Fetch(ctx, &FetchRequest{Namespace: testNS, IDs: [][]byte{id}, Start: 2, End: 1})
			return err
		}, "start 2 after end 1"},
		{"fetch tagged unknown namespace", func() error {
			_, err := c.FetchTagged(ctx, &FetchTaggedRequest{Namespace: "nope", Matchers: eq, End: 1})
			return err
		}, `unknown namespace "nope"`},
		{"fetch tagged not indexed", func() error {
			_, err := c.FetchTagged(ctx, &FetchTaggedRequest{Namespace: "noindex", Matchers: eq, End: 1})
			return err
		}, "is not indexed"},
		{"fetch tagged bad regex", func() error {
			_, err := c.FetchTagged(ctx, &FetchTaggedRequest{Namespace: testNS, Matchers: []Matcher{{uint8(labels.MatchRegexp), "job", "a("}}, End: 1})
			return err
		}, `matcher job=~"a("`},
		{"fetch tagged bad type", func() error {
			_, err := c.FetchTagged(ctx, &FetchTaggedRequest{Namespace: testNS, Matchers: []Matcher{{9, "job", "a"}}, End: 1})
			return err
		}, "matcher 0: unknown type 9"},
		{"fetch tagged no matchers", func() error {
			_, err := c.FetchTagged(ctx, &FetchTaggedRequest{Namespace: testNS, End: 1})
			return err
		}, "no matchers"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { requireCode(t, tc.call(), codes.InvalidArgument, tc.msg) })
	}
}

func TestStorageFailures(t *testing.T) {
	db := &faultyDB{Database: openStorage(t, commitlog.ModeAsync)}
	c := serve(t, db, nil, ServerOptions{}, ClientOptions{})
	ctx := context.Background()
	id := seriesID("cpu")

	db.mu.Lock()
	db.writeErr = errors.New("commit log queue full")
	db.readErr = fmt.Errorf("read block: %w", encoding.ErrCorrupt)
	db.mu.Unlock()

	_, err := writeReq(ctx, c, &WriteRequest{Namespace: testNS, Series: []WriteSeries{writeSeries(id, samplesNearNow(1, 0))}})
	requireCode(t, err, codes.Unavailable, "write batch: commit log queue full")
	_, err = c.Fetch(ctx, &FetchRequest{Namespace: testNS, IDs: [][]byte{id}, End: 1})
	requireCode(t, err, codes.DataLoss, "corrupt")

	db.mu.Lock()
	db.readErr = errors.New("disk on fire")
	db.mu.Unlock()
	_, err = c.Fetch(ctx, &FetchRequest{Namespace: testNS, IDs: [][]byte{id}, End: 1})
	requireCode(t, err, codes.Unavailable, "disk on fire")
}

func TestDeadlines(t *testing.T) {
	block := make(chan struct{})
	db := &faultyDB{Database: openStorage(t, commitlog.ModeAsync), block: block}
	c := serve(t, db, nil, ServerOptions{}, ClientOptions{Timeout: 50 * time.Millisecond})
	t.Cleanup(func() { close(block) }) // runs before the server stops
	id := seriesID("cpu")

	// The client's default timeout applies when the context has none.
	_, err := writeReq(context.Background(), c, &WriteRequest{Namespace: testNS, Series: []WriteSeries{writeSeries(id, samplesNearNow(1, 0))}})
	requireCode(t, err, codes.DeadlineExceeded, "")

	// A deadline on the context wins.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = c.Fetch(ctx, &FetchRequest{Namespace: testNS, IDs: [][]byte{id}, End: 1})
	requireCode(t, err, codes.DeadlineExceeded, "")

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	_, err = c.Health(ctx)
	requireCode(t, err, codes.Canceled, "")
}

func TestDialRejectsBadAddress(t *testing.T) {
	_, err := Dial("no-port", ClientOptions{})
	require.ErrorContains(t, err, `dial "no-port": want host:port`)
}

func TestUnreachableNode(t *testing.T) {
	c, err := Dial("127.0.0.1:1", ClientOptions{Timeout: 2 * time.Second})
	require.NoError(t, err, "dial does not wait for the connection")
	defer c.Close()
	_, err = c.Health(context.Background())
	requireCode(t, err, codes.Unavailable, "node 127.0.0.1:1: Health: Unavailable")
}

func TestConcurrentCalls(t *testing.T) {
	db := openStorage(t, commitlog.ModeAsync)
	c := serve(t, db, nil, ServerOptions{}, ClientOptions{})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := seriesID("cpu", "g", fmt.Sprint(g))
			samples := samplesNearNow(5, float64(g))
			for i := 0; i < 20; i++ { // rewriting the same samples is idempotent
				if _, err := writeReq(ctx, c, &WriteRequest{Namespace: testNS, Series: []WriteSeries{writeSeries(id, samples)}}); err != nil {
					errs <- err
					return
				}
				if _, err := c.Fetch(ctx, &FetchRequest{Namespace: testNS, IDs: [][]byte{id}, End: math.MaxInt64}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	fr, err := c.FetchTagged(ctx, &FetchTaggedRequest{Namespace: testNS, Matchers: []Matcher{{uint8(labels.MatchEqual), "__name__", "cpu"}}, End: math.MaxInt64})
	require.NoError(t, err)
	var got []string
	for _, s := range fr.Series {
		got = append(got, string(s.ID))
		require.Len(t, decodeStream(t, s.Stream), 5)
	}
	sort.Strings(got)
	require.Len(t, got, 8)
}

// A series the node already holds skips ID validation and hashing, but
// never the checks that depend on what was sent: the shard it was sent
// with must be the one holding it, and the node must own that shard for
// writes now.
func TestKnownSeriesStillChecked(t *testing.T) {
	db := openStorage(t, commitlog.ModeAsync)
	all := serve(t, db, nil, ServerOptions{}, ClientOptions{})
	ctx := context.Background()
	ids := idsInDistinctShards(2)
	known := ids[0]
	_, err := writeReq(ctx, all, &WriteRequest{Namespace: testNS, Series: []WriteSeries{writeSeries(known, samplesNearNow(1, 1))}})
	require.NoError(t, err)

	wrong := writeSeries(known, samplesNearNow(1, 2))
	wrong.Shard = (wrong.Shard + 1) % testShards
	_, err = writeReq(ctx, all, &WriteRequest{Namespace: testNS, Series: []WriteSeries{wrong}})
	requireCode(t, err, codes.InvalidArgument, fmt.Sprintf("but its ID hashes to shard %d", shardOf(known)))

	other := serve(t, db, ownsOnly(shardOf(ids[1])), ServerOptions{NodeID: "node1"}, ClientOptions{})
	_, err = writeReq(ctx, other, &WriteRequest{Namespace: testNS, Series: []WriteSeries{writeSeries(known, samplesNearNow(1, 3))}})
	requireCode(t, err, codes.FailedPrecondition, fmt.Sprintf("shard %d: not owned", shardOf(known)))

	// A known series beside a malformed one: the batch is refused whole.
	_, err = writeReq(ctx, all, &WriteRequest{Namespace: testNS, Series: []WriteSeries{
		writeSeries(known, samplesNearNow(1, 4)),
		writeSeries([]byte("\x01b\x011\x01a\x012"), samplesNearNow(1, 4)),
	}})
	requireCode(t, err, codes.InvalidArgument, "not sorted")

	fr, err := all.Fetch(ctx, &FetchRequest{Namespace: testNS, IDs: [][]byte{known}, Start: 0, End: math.MaxInt64})
	require.NoError(t, err)
	got := decodeStream(t, fr.Series[0].Stream)
	require.Len(t, got, 1)
	require.Equal(t, 1.0, got[0].V, "only the first write may have been applied")
}
