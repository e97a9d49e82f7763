package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/internal/waitfor"
	"github.com/tessera-tsdb/tessera/placement"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// behaviour is how a fake owner answers one call.
type behaviour int

const (
	ok       behaviour = iota
	hung               // blocks until its context is done
	failing            // fails at once
	refusing           // refuses the shards, as a node one placement behind
	slow               // answers after a while (longer than hedgeAfter)
)

var errFake = errors.New("fake disk on fire")

// fakeOwners answers Fanout calls per instance, and records them.
type fakeOwners struct {
	by       map[string]behaviour
	slowFor  time.Duration
	mu       sync.Mutex
	calls    []string         // instances called, in order
	finished map[string]error // instance -> ctx.Err() when its call ended
	started  map[string]chan struct{}
	stop     chan struct{} // closed by stopHung: hung calls end
}

func newFakeOwners(by map[string]behaviour) *fakeOwners {
	return &fakeOwners{by: by, slowFor: 200 * time.Millisecond, finished: map[string]error{}, started: map[string]chan struct{}{}, stop: make(chan struct{})}
}

func (f *fakeOwners) call(ctx context.Context, inst string, _ []int) (string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, inst)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.finished[inst] = ctx.Err()
		f.mu.Unlock()
	}()
	switch f.by[inst] {
	case hung:
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-f.stop:
			return "", errors.New("hung call stopped by the test")
		}
	case failing:
		return "", fmt.Errorf("%s: %w", inst, errFake)
	case refusing:
		return "", &rpc.Error{Addr: inst, Method: "FetchTagged",
			Status: status.New(codes.FailedPrecondition, "read refused: shard 1: not owned by "+inst)}
	case slow:
		t := time.NewTimer(f.slowFor)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return inst, nil
}

// stopHung ends the hung calls a write left detached (they would
// otherwise run until Timeout, past the test).
func (f *fakeOwners) stopHung() { close(f.stop) }

func (f *fakeOwners) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeOwners) finishedErr(inst string) (error, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	err, done := f.finished[inst]
	return err, done
}

func steadyOwners() []placement.Owner {
	return []placement.Owner{own("a", A, ""), own("b", A, ""), own("c", A, "")}
}

func failedNames(rep *FanoutReport) []string {
	var out []string
	for _, g := range rep.Groups {
		for _, f := range g.Failed {
			out = append(out, f.Instance)
		}
	}
	sort.Strings(out)
	return out
}

func TestFanoutReadLevels(t *testing.T) {
	type want struct {
		ok bool
		// timeout: the level can only be decided by the timeout (a hung
		// owner is still needed).
		timeout bool
	}
	cases := []struct {
		name   string
		by     map[string]behaviour
		levels map[ReadLevel]want
		failed []string // owners reported failed, for levels that fail fast
	}{
		{"all answer", map[string]behaviour{},
			map[ReadLevel]want{ReadOne: {ok: true}, ReadUnstrictMajority: {ok: true}, ReadMajority: {ok: true}, ReadAll: {ok: true}}, nil},
		{"last hung", map[string]behaviour{"c": hung},
			map[ReadLevel]want{ReadOne: {ok: true}, ReadUnstrictMajority: {ok: true}, ReadMajority: {ok: true}, ReadAll: {timeout: true}}, nil},
		{"first hung", map[string]behaviour{"a": hung},
			map[ReadLevel]want{ReadOne: {ok: true}, ReadUnstrictMajority: {ok: true}, ReadMajority: {ok: true}, ReadAll: {timeout: true}}, nil},
		{"one failing", map[string]behaviour{"a": failing},
			map[ReadLevel]want{ReadOne: {ok: true}, ReadUnstrictMajority: {ok: true}, ReadMajority: {ok: true}, ReadAll: {}}, []string{"a"}},
		{"two failing", map[string]behaviour{"a": failing, "c": failing},
			map[ReadLevel]want{ReadOne: {ok: true}, ReadUnstrictMajority: {ok: true}, ReadMajority: {}, ReadAll: {}}, nil},
		{"all failing", map[string]behaviour{"a": failing, "b": failing, "c": failing},
			map[ReadLevel]want{ReadOne: {}, ReadUnstrictMajority: {}, ReadMajority: {}, ReadAll: {}}, nil},
		{"refusing", map[string]behaviour{"b": refusing},
			map[ReadLevel]want{ReadOne: {ok: true}, ReadUnstrictMajority: {ok: true}, ReadMajority: {ok: true}, ReadAll: {}}, []string{"b"}},
		{"slow", map[string]behaviour{"a": slow, "b": slow},
			map[ReadLevel]want{ReadOne: {ok: true}, ReadUnstrictMajority: {ok: true}, ReadMajority: {ok: true}, ReadAll: {ok: true}}, nil},
		{"hung, failing, ok", map[string]behaviour{"a": hung, "b": failing},
			// unstrict: the hung owner might still answer, so only the
			// timeout settles it (host health marks such a host down).
			map[ReadLevel]want{ReadOne: {ok: true}, ReadUnstrictMajority: {timeout: true}, ReadMajority: {timeout: true}, ReadAll: {}}, []string{"b"}},
	}
	for _, tc := range cases {
		for _, level := range []ReadLevel{ReadOne, ReadUnstrictMajority, ReadMajority, ReadAll} {
			w := tc.levels[level]
			t.Run(tc.name+"/"+level.String(), func(t *testing.T) {
				t.Parallel()
				f := newFakeOwners(tc.by)
				timeout := time.Minute // never reached unless a case waits for it
				if w.timeout {
					timeout = 300 * time.Millisecond
				}
				owners := steadyOwners()
				groups := []FanoutGroup{{Owners: owners, Quorum: NewReadQuorum(owners, 3, level)}}
				start := time.Now()
				answers, rep := Fanout(context.Background(), groups, FanoutOptions{Read: true, HedgeAfter: 20 * time.Millisecond, Timeout: timeout}, f.call)
				took := time.Since(start)
				require.Equal(t, w.ok, rep.OK, "report %+v", rep)
				if w.ok {
					require.NotEmpty(t, answers)
					require.Nil(t, rep.Cause)
					require.True(t, rep.Groups[0].Satisfied)
					// Decided by answers, not the minute-long timeout.
					require.Less(t, took, 20*time.Second)
					return
				}
				require.False(t, rep.Groups[0].Satisfied)
				if w.timeout {
					require.ErrorIs(t, rep.Cause, context.DeadlineExceeded)
					require.NotEmpty(t, rep.Groups[0].Pending, "the hung owner is named as pending")
					return
				}
				require.Nil(t, rep.Cause, "failed fast, not on the timeout")
				require.Less(t, took, 20*time.Second)
				if tc.failed != nil {
					require.Equal(t, tc.failed, failedNames(rep))
				}
				for _, g := range rep.Groups {
					for _, fl := range g.Failed {
						require.Error(t, fl.Err)
					}
				}
			})
		}
	}
}

// TestFanoutReadAsksOnlyWhatTheLevelNeeds: with every owner answering,
// level one asks one owner and majority two; the third is never called.
func TestFanoutReadAsksOnlyWhatTheLevelNeeds(t *testing.T) {
	for level, n := range map[ReadLevel]int{ReadOne: 1, ReadUnstrictMajority: 2, ReadMajority: 2, ReadAll: 3} {
		f := newFakeOwners(nil)
		owners := steadyOwners()
		// A long hedge delay: only the first stage runs.
		_, rep := Fanout(context.Background(), []FanoutGroup{{Owners: owners, Quorum: NewReadQuorum(owners, 3, level)}},
			FanoutOptions{Read: true, HedgeAfter: time.Hour, Timeout: time.Minute}, f.call)
		require.True(t, rep.OK)
		require.Len(t, f.called(), n, level.String())
		require.Equal(t, []string{"a", "b", "c"}[:n], sorted(f.called()), "asked in the given order (this node first)")
		require.Zero(t, rep.Hedged)
	}
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

// TestFanoutHedgesPastAHungOwner: the first owner hangs; the answer comes
// from the owner the hedge asked, and the hung call is cancelled once the
// fan-out returned.
func TestFanoutHedgesPastAHungOwner(t *testing.T) {
	for _, level := range []ReadLevel{ReadOne, ReadUnstrictMajority, ReadMajority} {
		f := newFakeOwners(map[string]behaviour{"a": hung})
		owners := steadyOwners()
		answers, rep := Fanout(context.Background(), []FanoutGroup{{Owners: owners, Quorum: NewReadQuorum(owners, 3, level)}},
			FanoutOptions{Read: true, HedgeAfter: 20 * time.Millisecond, Timeout: time.Minute}, f.call)
		require.True(t, rep.OK, level.String())
		require.Positive(t, rep.Hedged)
		var from []string
		for _, a := range answers {
			from = append(from, a.Value)
		}
		require.NotContains(t, from, "a")
		require.Contains(t, from, "b")
		waitfor.Condition(t, 10*time.Second, 5*time.Millisecond, "hung call cancelled", func() error {
			err, done := f.finishedErr("a")
			if !done {
				return errors.New("still running")
			}
			if !errors.Is(err, context.Canceled) {
				return fmt.Errorf("ended with %v, want canceled", err)
			}
			return nil
		})
	}
}

// TestFanoutReadReplacesFailedOwnerAtOnce: a failing first owner is
// replaced without waiting for the hedge delay.
func TestFanoutReadReplacesFailedOwnerAtOnce(t *testing.T) {
	f := newFakeOwners(map[string]behaviour{"a": failing})
	owners := steadyOwners()
	_, rep := Fanout(context.Background(), []FanoutGroup{{Owners: owners, Quorum: NewReadQuorum(owners, 3, ReadOne)}},
		FanoutOptions{Read: true, HedgeAfter: time.Hour, Timeout: time.Minute}, f.call)
	require.True(t, rep.OK)
	require.Equal(t, []string{"a", "b"}, f.called())
	require.Zero(t, rep.Hedged)
	require.Equal(t, []string{"a"}, failedNames(rep))
	require.ErrorIs(t, rep.Groups[0].Failed[0].Err, errFake)
}

// TestFanoutReadSkipsDownHostsFirst: a host known down is asked last.
func TestFanoutReadSkipsDownHostsFirst(t *testing.T) {
	f := newFakeOwners(nil)
	owners := steadyOwners()
	_, rep := Fanout(context.Background(), []FanoutGroup{{Owners: owners, Quorum: NewReadQuorum(owners, 3, ReadMajority)}},
		FanoutOptions{Read: true, HedgeAfter: time.Hour, Timeout: time.Minute, Down: func(i string) bool { return i == "a" }}, f.call)
	require.True(t, rep.OK)
	require.Equal(t, []string{"b", "c"}, sorted(f.called()))
}

// TestFanoutGroupsWithoutOwners: a group no one can read fails at once.
func TestFanoutGroupsWithoutOwners(t *testing.T) {
	f := newFakeOwners(nil)
	owners := []placement.Owner{own("d", I, "")}
	_, rep := Fanout(context.Background(), []FanoutGroup{{Owners: nil, Quorum: NewReadQuorum(owners, 3, ReadOne)}},
		FanoutOptions{Read: true, HedgeAfter: time.Hour, Timeout: time.Minute}, f.call)
	require.False(t, rep.OK)
	require.Nil(t, rep.Cause)
}

// TestFanoutManyGroups: one hung host shared by two groups, with a third
// group that it does not own; every group meets its level.
func TestFanoutManyGroups(t *testing.T) {
	f := newFakeOwners(map[string]behaviour{"a": hung})
	g1 := []placement.Owner{own("a", A, ""), own("b", A, ""), own("c", A, "")}
	g2 := []placement.Owner{own("a", A, ""), own("c", A, ""), own("d", A, "")}
	g3 := []placement.Owner{own("b", A, ""), own("c", A, ""), own("d", A, "")}
	groups := []FanoutGroup{
		{Owners: g1, Quorum: NewReadQuorum(g1, 3, ReadUnstrictMajority)},
		{Owners: g2, Quorum: NewReadQuorum(g2, 3, ReadUnstrictMajority)},
		{Owners: g3, Quorum: NewReadQuorum(g3, 3, ReadUnstrictMajority)},
	}
	answers, rep := Fanout(context.Background(), groups, FanoutOptions{Read: true, HedgeAfter: 20 * time.Millisecond, Timeout: time.Minute}, f.call)
	require.True(t, rep.OK)
	covered := make([]int, 3)
	for _, a := range answers {
		for _, g := range a.Groups {
			covered[g]++
		}
	}
	require.Equal(t, []int{2, 2, 2}, covered, "every group answered by a majority")
}

func TestFanoutWriteLevels(t *testing.T) {
	moving := func() []placement.Owner {
		return []placement.Owner{own("a", A, ""), own("b", A, ""), own("c", L, ""), own("d", I, "c")}
	}
	cases := []struct {
		name    string
		owners  []placement.Owner
		by      map[string]behaviour
		level   WriteLevel
		pairing bool
		ok      bool
		failed  []string
	}{
		{"one of three", steadyOwners(), map[string]behaviour{"b": failing, "c": failing}, WriteOne, true, true, nil},
		{"majority with one failing", steadyOwners(), map[string]behaviour{"c": failing}, WriteMajority, true, true, nil},
		{"majority with two failing", steadyOwners(), map[string]behaviour{"b": failing, "c": refusing}, WriteMajority, true, false, []string{"b", "c"}},
		{"all with one refusing", steadyOwners(), map[string]behaviour{"b": refusing}, WriteAll, true, false, []string{"b"}},
		{"all", steadyOwners(), nil, WriteAll, true, true, nil},
		{"majority with one hung", steadyOwners(), map[string]behaviour{"c": hung}, WriteMajority, true, true, nil},
		{"pair counts one", moving(), map[string]behaviour{"b": failing}, WriteMajority, true, true, nil},
		{"pair without pairing", moving(), map[string]behaviour{"b": failing}, WriteMajority, false, false, []string{"b"}},
		{"initializing alone does not count", moving(), map[string]behaviour{"b": failing, "c": failing}, WriteMajority, true, false, []string{"b", "c"}},
		{"available majority while moving", moving(), map[string]behaviour{"c": failing, "d": failing}, WriteMajority, false, true, nil},
		{"all while moving with pair", moving(), nil, WriteAll, true, true, nil},
		{"all while moving, initializing failing", moving(), map[string]behaviour{"d": failing}, WriteAll, true, false, []string{"d"}},
		{"all while moving without pairing", moving(), nil, WriteAll, false, false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeOwners(tc.by)
			defer f.stopHung()
			groups := []FanoutGroup{{Owners: tc.owners, Quorum: NewWriteQuorum(tc.owners, 3, tc.level, tc.pairing)}}
			start := time.Now()
			_, rep := Fanout(context.Background(), groups, FanoutOptions{Timeout: time.Minute}, f.call)
			require.Less(t, time.Since(start), 20*time.Second, "decided by answers, not the timeout")
			require.Equal(t, tc.ok, rep.OK, "%+v", rep)
			if tc.failed != nil {
				require.Equal(t, tc.failed, failedNames(rep))
			}
			// Every owner got the write, whatever the level.
			waitfor.Condition(t, 10*time.Second, 5*time.Millisecond, "every owner called", func() error {
				if n := len(f.called()); n != len(tc.owners) {
					return fmt.Errorf("%d of %d owners called", n, len(tc.owners))
				}
				return nil
			})
		})
	}
}

// TestFanoutWriteDeliversToSlowOwnerAfterReturn: the write returns at
// quorum; the slow replica still gets it, even after the caller's context
// is cancelled.
func TestFanoutWriteDeliversToSlowOwnerAfterReturn(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	delivered := map[string]error{}
	call := func(ctx context.Context, inst string, _ []int) (string, error) {
		if inst == "c" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		mu.Lock()
		delivered[inst] = ctx.Err()
		mu.Unlock()
		return inst, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	owners := steadyOwners()
	_, rep := Fanout(ctx, []FanoutGroup{{Owners: owners, Quorum: NewWriteQuorum(owners, 3, WriteMajority, true)}},
		FanoutOptions{Timeout: time.Minute}, call)
	require.True(t, rep.OK)
	mu.Lock()
	_, cDone := delivered["c"]
	mu.Unlock()
	require.False(t, cDone, "returned at quorum, before the slow replica")
	cancel() // the caller is gone
	close(release)
	waitfor.Condition(t, 10*time.Second, 5*time.Millisecond, "slow replica written", func() error {
		mu.Lock()
		defer mu.Unlock()
		err, done := delivered["c"]
		if !done {
			return errors.New("not yet")
		}
		if err != nil {
			return fmt.Errorf("slow replica's context ended: %v", err)
		}
		return nil
	})
}

// TestFanoutCallerCancelled: a read whose caller gives up returns with
// the caller's error.
func TestFanoutCallerCancelled(t *testing.T) {
	f := newFakeOwners(map[string]behaviour{"a": hung, "b": hung, "c": hung})
	ctx, cancel := context.WithCancel(context.Background())
	owners := steadyOwners()
	done := make(chan *FanoutReport)
	go func() {
		_, rep := Fanout(ctx, []FanoutGroup{{Owners: owners, Quorum: NewReadQuorum(owners, 3, ReadOne)}},
			FanoutOptions{Read: true, HedgeAfter: 10 * time.Millisecond, Timeout: time.Minute}, f.call)
		done <- rep
	}()
	waitfor.Condition(t, 10*time.Second, 5*time.Millisecond, "every owner asked", func() error {
		if n := len(f.called()); n < 3 {
			return fmt.Errorf("%d asked", n)
		}
		return nil
	})
	cancel()
	rep := <-done
	require.False(t, rep.OK)
	require.ErrorIs(t, rep.Cause, context.Canceled)
	require.Equal(t, []string{"a", "b", "c"}, rep.Groups[0].Pending)
	require.True(t, strings.Contains(fmt.Sprint(rep.Cause), "canceled"))
}

// TestFanoutHedgesAfterFirstAnswer: with HedgeAfterFirst, no owner is
// hedged while nothing answered (a pushdown's parts all take their time);
// once one did, a hung owner's group is asked of the next owner.
func TestFanoutHedgesAfterFirstAnswer(t *testing.T) {
	f := newFakeOwners(map[string]behaviour{"a": hung})
	owners := steadyOwners()
	_, rep := Fanout(context.Background(), []FanoutGroup{{Owners: owners, Quorum: NewReadQuorum(owners, 3, ReadOne)}},
		FanoutOptions{Read: true, HedgeAfter: time.Millisecond, HedgeAfterFirst: true, Timeout: 300 * time.Millisecond}, f.call)
	require.False(t, rep.OK, "nothing answered: nobody hedged, the timeout ended it")
	require.Zero(t, rep.Hedged)
	require.Equal(t, []string{"a"}, f.called())

	f = newFakeOwners(map[string]behaviour{"a": hung})
	rotated := []placement.Owner{own("b", A, ""), own("c", A, ""), own("a", A, "")}
	answers, rep := Fanout(context.Background(), []FanoutGroup{
		{Owners: owners, Quorum: NewReadQuorum(owners, 3, ReadOne)},
		{Owners: rotated, Quorum: NewReadQuorum(rotated, 3, ReadOne)},
	}, FanoutOptions{Read: true, HedgeAfter: time.Millisecond, HedgeAfterFirst: true, Timeout: time.Minute}, f.call)
	require.True(t, rep.OK)
	require.Positive(t, rep.Hedged)
	for _, a := range answers {
		require.NotEqual(t, "a", a.Value)
	}
}
