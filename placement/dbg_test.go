package placement

import (
	"testing"
)

func TestDbg(t *testing.T) {
	ins := []Instance{inst("n001", "g1", 3), inst("n002", "g0", 2), inst("n003", "g1", 1), inst("n004", "g0", 1)}
	p := MarkAllAvailable(mustInit(t, ins, 328, 2))
	debugChains = func(w *work, start int, chain []step, cost int) {
		t.Log("start", start, "cost", cost, chain, "targets", w.target, "counts", w.count)
	}
	q, err := Replace(p, []string{"n004"}, []Instance{inst("n005", "g5", 3), inst("n006", "g0", 2)})
	debugChains = nil
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range q.Instances {
		c := in.CountByState()
		t.Log(in.ID, c)
	}
	t.Log(newCopies(p, q), minMoves(p, q))
}
