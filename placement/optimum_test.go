package placement

import (
	"container/heap"
	"math"
)

// minMoves is the reference optimum for the property tests: the fewest new
// copies any assignment needs to go from the settled placement prev to the
// per-instance counts of next, keeping the isolation-group rule. It solves
// a min-cost flow exactly, so it is only run on small placements:
//
//	source -RF-> shard -1-> (shard, group) -1-> instance -count-> sink
//
// where an edge into an instance costs 0 if prev already has that copy
// there, else 1.
func minMoves(prev, next Placement) int {
	type ref struct{ id, group string }
	var ins []ref
	groups := map[string]int{}
	for _, in := range next.Instances {
		if in.IsLeaving() {
			continue
		}
		ins = append(ins, ref{in.ID, in.IsolationGroup})
		if _, ok := groups[in.IsolationGroup]; !ok {
			groups[in.IsolationGroup] = len(groups)
		}
	}
	n, g := int(next.NumShards), len(groups)
	src, sink := 0, 1
	shardNode := func(s int) int { return 2 + s }
	sgNode := func(s, k int) int { return 2 + n + s*g + k }
	instNode := func(i int) int { return 2 + n + n*g + i }
	f := newFlow(2 + n + n*g + len(ins))
	for s := range n {
		f.edge(src, shardNode(s), next.ReplicaFactor, 0)
		for k := range g {
			f.edge(shardNode(s), sgNode(s, k), 1, 0)
		}
	}
	for i, r := range ins {
		old, _ := prev.Instance(r.id)
		have := map[uint32]bool{}
		for _, s := range old.Shards {
			if s.State != Leaving {
				have[s.ID] = true
			}
		}
		for s := range n {
			cost := 1
			if have[uint32(s)] {
				cost = 0
			}
			f.edge(sgNode(s, groups[r.group]), instNode(i), 1, cost)
		}
		cur, _ := next.Instance(r.id)
		f.edge(instNode(i), sink, owned(cur), 0)
	}
	flow, cost := f.run(src, sink)
	if flow != n*next.ReplicaFactor {
		return -1
	}
	return cost
}

type flowEdge struct{ to, cap, cost, rev int }

type flowGraph struct{ adj [][]flowEdge }

func newFlow(nodes int) *flowGraph { return &flowGraph{adj: make([][]flowEdge, nodes)} }

func (f *flowGraph) edge(a, b, capacity, cost int) {
	f.adj[a] = append(f.adj[a], flowEdge{b, capacity, cost, len(f.adj[b])})
	f.adj[b] = append(f.adj[b], flowEdge{a, 0, -cost, len(f.adj[a]) - 1})
}

// run is successive shortest paths with Dijkstra and potentials.
func (f *flowGraph) run(s, t int) (flow, cost int) {
	nodes := len(f.adj)
	pot := make([]int, nodes)
	for {
		dist := make([]int, nodes)
		for i := range dist {
			dist[i] = math.MaxInt
		}
		prevNode, prevEdge := make([]int, nodes), make([]int, nodes)
		dist[s] = 0
		pq := &distHeap{{s, 0}}
		for pq.Len() > 0 {
			it := heap.Pop(pq).(distItem)
			if it.d > dist[it.node] {
				continue
			}
			for k, e := range f.adj[it.node] {
				if e.cap == 0 {
					continue
				}
				nd := it.d + e.cost + pot[it.node] - pot[e.to]
				if nd < dist[e.to] {
					dist[e.to], prevNode[e.to], prevEdge[e.to] = nd, it.node, k
					heap.Push(pq, distItem{e.to, nd})
				}
			}
		}
		if dist[t] == math.MaxInt {
			return flow, cost
		}
		for i := range pot {
			if dist[i] != math.MaxInt {
				pot[i] += dist[i]
			}
		}
		push := math.MaxInt
		for v := t; v != s; v = prevNode[v] {
			push = min(push, f.adj[prevNode[v]][prevEdge[v]].cap)
		}
		for v := t; v != s; v = prevNode[v] {
			e := &f.adj[prevNode[v]][prevEdge[v]]
			e.cap -= push
			f.adj[v][e.rev].cap += push
			cost += push * e.cost
		}
		flow += push
	}
}

type distItem struct{ node, d int }
type distHeap []distItem

func (h distHeap) Len() int           { return len(h) }
func (h distHeap) Less(i, j int) bool { return h[i].d < h[j].d }
func (h distHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *distHeap) Push(x any)        { *h = append(*h, x.(distItem)) }
func (h *distHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
