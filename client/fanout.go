package client

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/tessera-tsdb/tessera/placement"
)

// FanoutGroup is the shards of one request whose owners are the same in
// the same states: they are asked together and meet their level together,
// so one Quorum decides for all of them.
type FanoutGroup struct {
	// Owners in asking order. Reads: the readable (AVAILABLE, LEAVING)
	// owners, this node first. Writes: every owner.
	Owners []placement.Owner
	// Quorum counts the answers; the counting rules live there, not here.
	Quorum *Quorum
}

// FanoutOptions configure one fan-out.
type FanoutOptions struct {
	// Read: ask only as many owners per group as the level needs, hedge
	// and replace failures, and cancel the stragglers on return. Otherwise
	// (a write) every owner is called at once and the calls outlive the
	// return, under a context detached from the caller's.
	Read bool
	// HedgeAfter: a read asks the next owner of every group still short of
	// its level after each HedgeAfter. Zero disables hedging.
	HedgeAfter time.Duration
	// HedgeAfterFirst starts hedging only once the first call answered,
	// every max(HedgeAfter, the time that first answer took): for calls
	// whose duration grows with the work they do (pushed-down queries
	// computing over their part of the data), a call slower than
	// HedgeAfter is no straggler until the others show it is one, and
	// hedging it would compute the same part again on a busy cluster.
	HedgeAfterFirst bool
	// Timeout bounds the whole fan-out, and a write's stragglers.
	Timeout time.Duration
	// Down reports hosts known not to answer; a read asks them last. Nil:
	// none are.
	Down func(instance string) bool
}

// FanoutAnswer is one successful call: the instance, the group indices it
// was asked for, and what it returned.
type FanoutAnswer[T any] struct {
	Instance string
	Groups   []int
	Value    T
}

// OwnerFailure is one owner that failed a group, and why.
type OwnerFailure struct {
	Instance string
	Err      error
}

// GroupReport says how one group ended.
type GroupReport struct {
	Satisfied bool
	// Failed owners, sorted by instance.
	Failed []OwnerFailure
	// Pending owners were asked and had not answered when the fan-out
	// returned (the timeout, or the caller gave up), sorted.
	Pending []string
}

// FanoutReport is the outcome of a fan-out: OK when every group met its
// level. Cause is the context error when the fan-out ended on its timeout
// or the caller's context.
type FanoutReport struct {
	OK     bool
	Groups []GroupReport
	Cause  error
	// Hedged counts the owners a read asked because of HedgeAfter.
	Hedged int
}

type fanResult[T any] struct {
	instance string
	groups   []int
	value    T
	err      error
}

// fanGroup is the per-group progress of one fan-out.
type fanGroup struct {
	order   []int // owner indices in asking order
	next    int   // index into order of the next owner to ask
	pending map[string]bool
	failed  []OwnerFailure
}

// Fanout calls the owners of every group concurrently, call(ctx, instance,
// groups) once per instance per stage with the indices of the groups it is
// asked for, and returns as soon as every group met its level, or one
// cannot any more, or the timeout passes. It is the one fan-out of the
// session's writes and reads (in the spirit of dskit's DoUntilQuorum).
//
// Reads ask, per group, as many owners as the level needs (hosts not
// known down first, in the given order), replace a failed owner at once,
// and after every HedgeAfter ask the next owner of each group still short
// of its level, at every level (at all there is nobody left to hedge to).
// Calls still running when it returns are cancelled.
//
// Writes call every owner at once. The calls run under a context detached
// from the caller's, bounded by Timeout: every replica gets the write even
// after the level is met (DESIGN.md), so stragglers are not cancelled.
//
// Answers holds the successful calls received before the return. The
// quorums are driven from this goroutine only.
func Fanout[T any](ctx context.Context, groups []FanoutGroup, opts FanoutOptions,
	call func(ctx context.Context, instance string, groups []int) (T, error)) ([]FanoutAnswer[T], *FanoutReport) {
	rep := &FanoutReport{Groups: make([]GroupReport, len(groups))}
	waitCtx, cancelWait := context.WithTimeout(ctx, opts.Timeout)
	defer cancelWait()
	var callCtx context.Context
	var cancelCalls context.CancelFunc
	if opts.Read {
		callCtx, cancelCalls = waitCtx, cancelWait
	} else {
		callCtx, cancelCalls = context.WithTimeout(context.WithoutCancel(ctx), opts.Timeout)
	}

	// Every owner is asked at most once per group and a call covers at
	// least one group, so this many slots never block a sender: a call
	// finishing after the return leaves its result to the collector.
	slots := 0
	state := make([]fanGroup, len(groups))
	for i, g := range groups {
		slots += len(g.Owners)
		st := &state[i]
		st.order = make([]int, len(g.Owners))
		for j := range st.order {
			st.order[j] = j
		}
		if opts.Read && opts.Down != nil {
			sort.SliceStable(st.order, func(a, b int) bool {
				return !opts.Down(g.Owners[st.order[a]].InstanceID) && opts.Down(g.Owners[st.order[b]].InstanceID)
			})
		}
		st.pending = map[string]bool{}
	}
	results := make(chan fanResult[T], slots)
	var calls sync.WaitGroup
	inflight := 0
	ask := func(plan map[string][]int) {
		for inst, gs := range plan {
			inflight++
			calls.Add(1)
			go func() {
				defer calls.Done()
				v, err := call(callCtx, inst, gs)
				results <- fanResult[T]{instance: inst, groups: gs, value: v, err: err}
			}()
		}
	}
	// A write's detached context ends when its last call did (a read's
	// ends at the return, with waitCtx).
	defer func() { go func() { calls.Wait(); cancelCalls() }() }()
	// askNext adds the next n owners of group gi to plan.
	askNext := func(plan map[string][]int, gi, n int) {
		st := &state[gi]
		for ; n > 0 && st.next < len(st.order); n-- {
			inst := groups[gi].Owners[st.order[st.next]].InstanceID
			st.next++
			st.pending[inst] = true
			plan[inst] = append(plan[inst], gi)
		}
	}

	plan := map[string][]int{}
	for gi, g := range groups {
		n := len(g.Owners)
		if opts.Read {
			n = g.Quorum.Need()
		}
		askNext(plan, gi, n)
	}
	ask(plan)

	var (
		hedge   <-chan time.Time
		hedging *time.Ticker
		begun   = time.Now()
	)
	startHedging := func(every time.Duration) {
		hedging = time.NewTicker(every)
		hedge = hedging.C
	}
	defer func() {
		if hedging != nil {
			hedging.Stop()
		}
	}()
	if opts.Read && opts.HedgeAfter > 0 && !opts.HedgeAfterFirst {
		startHedging(opts.HedgeAfter)
	}
	var answers []FanoutAnswer[T]
	for {
		// Decide before waiting: a group with no owner at all is
		// impossible from the start.
		done, ok := true, true
		for gi := range groups {
			q := groups[gi].Quorum
			if q.Satisfied() {
				continue
			}
			done = false
			if !q.Possible() || (inflight == 0 && state[gi].next >= len(state[gi].order)) {
				ok = false
			}
		}
		if done || !ok {
			rep.OK = done
			break
		}
		select {
		case r := <-results:
			inflight--
			if r.err != nil && opts.Read && waitCtx.Err() != nil {
				// Our own deadline (or the caller) ended this call: the
				// owner did not fail, it did not answer in time.
				rep.Cause = timeoutCause(ctx, waitCtx, opts.Timeout)
				break
			}
			plan := map[string][]int{}
			for _, gi := range r.groups {
				groups[gi].Quorum.Record(r.instance, r.err == nil)
				delete(state[gi].pending, r.instance)
				if r.err != nil {
					state[gi].failed = append(state[gi].failed, OwnerFailure{Instance: r.instance, Err: r.err})
					if opts.Read && !groups[gi].Quorum.Satisfied() {
						askNext(plan, gi, 1) // a failed owner is replaced at once
					}
				}
			}
			if r.err == nil {
				answers = append(answers, FanoutAnswer[T]{Instance: r.instance, Groups: r.groups, Value: r.value})
				if hedging == nil && opts.Read && opts.HedgeAfter > 0 && opts.HedgeAfterFirst {
					startHedging(max(opts.HedgeAfter, time.Since(begun)))
				}
			}
			ask(plan)
		case <-hedge:
			plan := map[string][]int{}
			for gi := range groups {
				if !groups[gi].Quorum.Satisfied() {
					askNext(plan, gi, 1)
				}
			}
			for _, gs := range plan {
				rep.Hedged += len(gs)
			}
			ask(plan)
		case <-waitCtx.Done():
			rep.Cause = timeoutCause(ctx, waitCtx, opts.Timeout)
		}
		if rep.Cause != nil {
			break
		}
	}
	for gi := range groups {
		st := &state[gi]
		gr := &rep.Groups[gi]
		gr.Satisfied = groups[gi].Quorum.Satisfied()
		gr.Failed = st.failed
		sort.Slice(gr.Failed, func(a, b int) bool { return gr.Failed[a].Instance < gr.Failed[b].Instance })
		for inst := range st.pending {
			gr.Pending = append(gr.Pending, inst)
		}
		sort.Strings(gr.Pending)
	}
	if rep.Cause != nil {
		rep.OK = false
	}
	return answers, rep
}

// timeoutCause is why a fan-out ended before its groups decided: the
// caller's context, or the fan-out's own timeout.
func timeoutCause(caller, wait context.Context, timeout time.Duration) error {
	if err := caller.Err(); err != nil {
		return err
	}
	return fmt.Errorf("no answer within %v: %w", timeout, wait.Err())
}
