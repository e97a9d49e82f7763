package encoding

// MergeIterators merges iterators by timestamp. On equal timestamps the
// iterator later in the argument list wins and the others' samples at that
// timestamp are dropped (last write wins: pass older data first). Iteration
// stops at the first error of any input, which Err then reports.
func MergeIterators(its ...Iterator) Iterator {
	switch len(its) {
	case 0:
		return errIterator{}
	case 1:
		return its[0]
	case 2:
		// The common case (a flushed block and a cold write to it, or a
		// flushing bucket and the open one): one comparison per sample
		// instead of the heap's.
		return &merge2{a: its[0], b: its[1]}
	}
	m := &mergeIterator{its: its, heap: make([]mergeHead, 0, len(its))}
	return m
}

// merge2 is mergeIterator for two inputs; b wins ties.
type merge2 struct {
	a, b       Iterator
	ta, tb     int64
	va, vb     float64
	hasA, hasB bool
	// usedA, usedB: the input's head was the last sample returned (both
	// on a tie), to be advanced by the next Next.
	usedA, usedB bool
	started      bool
	t            int64
	v            float64
	err          error
}

func (m *merge2) Next() bool {
	if m.err != nil {
		return false
	}
	if !m.started {
		m.started = true
		m.usedA, m.usedB = true, true
	}
	if m.usedA {
		if m.hasA = m.a.Next(); m.hasA {
			m.ta, m.va = m.a.At()
		} else if m.err = m.a.Err(); m.err != nil {
			return false
		}
	}
	if m.usedB {
		if m.hasB = m.b.Next(); m.hasB {
			m.tb, m.vb = m.b.At()
		} else if m.err = m.b.Err(); m.err != nil {
			return false
		}
	}
	switch {
	case m.hasA && (!m.hasB || m.ta < m.tb):
		m.t, m.v, m.usedA, m.usedB = m.ta, m.va, true, false
	case m.hasB:
		m.t, m.v, m.usedA, m.usedB = m.tb, m.vb, m.hasA && m.ta == m.tb, true
	default:
		m.usedA, m.usedB = false, false
		return false
	}
	return true
}

func (m *merge2) At() (int64, float64) { return m.t, m.v }
func (m *merge2) Err() error           { return m.err }

// ConcatIterators returns the samples of its one after the other: the
// caller promises that every sample of an input is older than every
// sample of the next (the blocks of one series), so no merge is needed.
// Iteration stops at the first error of an input, which Err reports.
func ConcatIterators(its ...Iterator) Iterator {
	switch len(its) {
	case 0:
		return errIterator{}
	case 1:
		return its[0]
	}
	return &concatIterator{its: its}
}

type concatIterator struct {
	its []Iterator
	i   int
	err error
}

func (c *concatIterator) Next() bool {
	for c.i < len(c.its) {
		it := c.its[c.i]
		if it.Next() {
			return true
		}
		if c.err = it.Err(); c.err != nil {
			c.i = len(c.its)
			return false
		}
		c.i++
	}
	return false
}

func (c *concatIterator) At() (int64, float64) {
	if c.i < len(c.its) {
		return c.its[c.i].At()
	}
	return 0, 0
}

func (c *concatIterator) Err() error { return c.err }

// mergeHead is the current sample of one input.
type mergeHead struct {
	t   int64
	v   float64
	idx int // position in the argument list: larger wins ties
}

// mergeIterator keeps one head per live input in a binary min-heap ordered
// by (timestamp, -idx), so the winner of a tie pops first.
type mergeIterator struct {
	its     []Iterator
	heap    []mergeHead
	started bool
	t       int64
	v       float64
	err     error
}

func (m *mergeIterator) Next() bool {
	if m.err != nil {
		return false
	}
	if !m.started {
		m.started = true
		for i := range m.its {
			if !m.push(i) {
				return false
			}
		}
	} else {
		// Advance the inputs whose head was the last sample: the winner
		// and every input that had the same timestamp.
		for len(m.heap) > 0 && m.heap[0].t == m.t {
			i := m.heap[0].idx
			m.pop()
			if !m.push(i) {
				return false
			}
		}
	}
	if len(m.heap) == 0 {
		return false
	}
	m.t, m.v = m.heap[0].t, m.heap[0].v
	return true
}

// push advances input i and adds its next sample to the heap; it returns
// false if the input failed.
func (m *mergeIterator) push(i int) bool {
	it := m.its[i]
	if !it.Next() {
		if err := it.Err(); err != nil {
			m.err = err
			return false
		}
		return true
	}
	t, v := it.At()
	m.heap = append(m.heap, mergeHead{t: t, v: v, idx: i})
	m.up(len(m.heap) - 1)
	return true
}

func (m *mergeIterator) less(a, b int) bool {
	ha, hb := &m.heap[a], &m.heap[b]
	return ha.t < hb.t || (ha.t == hb.t && ha.idx > hb.idx)
}

func (m *mergeIterator) up(j int) {
	for j > 0 {
		p := (j - 1) / 2
		if !m.less(j, p) {
			break
		}
		m.heap[j], m.heap[p] = m.heap[p], m.heap[j]
		j = p
	}
}

func (m *mergeIterator) pop() {
	n := len(m.heap) - 1
	m.heap[0] = m.heap[n]
	m.heap = m.heap[:n]
	for j := 0; ; {
		l := 2*j + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && m.less(r, l) {
			c = r
		}
		if !m.less(c, j) {
			break
		}
		m.heap[j], m.heap[c] = m.heap[c], m.heap[j]
		j = c
	}
}

func (m *mergeIterator) At() (int64, float64) { return m.t, m.v }
func (m *mergeIterator) Err() error           { return m.err }
