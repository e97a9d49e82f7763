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
	}
	m := &mergeIterator{its: its, heap: make([]mergeHead, 0, len(its))}
	return m
}

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
