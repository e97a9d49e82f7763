package bench

import (
	"encoding/binary"
	"math"
	"strconv"
)

// Remote write 2.0 (io.prometheus.write.v2.Request) as Prometheus sends
// it: one symbols table per request, starting with "", every series'
// labels as references into it, and the metric's metadata (type and help)
// on every series.
const (
	contentTypeV1 = "application/x-protobuf"
	contentTypeV2 = "application/x-protobuf;proto=io.prometheus.write.v2.Request"
)

// MetricType is the 2.0 metadata type of series i: counters for the
// counting kind of Value, gauges for the rest (2.0 type numbers).
func MetricType(i int) int32 {
	if i%4 == 0 {
		return 1 // COUNTER
	}
	return 2 // GAUGE
}

// Help is the help text of series i's metric.
func Help(i int) string { return "Tessera bench series of kind " + strconv.Itoa(i%4) + "." }

// requestEncoderV2 writes the 2.0 requests of the workload by hand, the
// bytes the v2 types' Marshal would produce. Symbols are numbered in the
// order Prometheus' SymbolsTable gives them (first use), per request.
type requestEncoderV2 struct {
	o       Options
	strs    [][]string // series i: label name, value, name, value...
	syms    map[string]uint32
	symList []string
	ts      []byte // one TimeSeries being built
}

func newRequestEncoderV2(o Options) *requestEncoderV2 {
	e := &requestEncoderV2{o: o, strs: make([][]string, o.Series), syms: map[string]uint32{}}
	for i := range e.strs {
		for _, l := range Labels(o, i) {
			e.strs[i] = append(e.strs[i], l.Name, l.Value)
		}
	}
	return e
}

func (e *requestEncoderV2) symbol(s string) uint32 {
	if r, ok := e.syms[s]; ok {
		return r
	}
	r := uint32(len(e.symList))
	e.syms[s] = r
	e.symList = append(e.symList, s)
	return r
}

// appendRequest appends the 2.0 request holding samples [from, to) of the
// time-major order (see requestEncoder.appendRequest).
func (e *requestEncoderV2) appendRequest(b []byte, from, to int) []byte {
	clear(e.syms)
	e.symList = e.symList[:0]
	e.symbol("")
	step := e.o.Interval.Milliseconds()
	var series []byte // every TimeSeries field, after the symbols
	var refs []byte
	for k := from; k < to; k++ {
		i, j := k%e.o.Series, k/e.o.Series
		ts, v := e.o.Start+int64(j)*step, Value(i, j)
		refs = refs[:0]
		for _, s := range e.strs[i] {
			refs = binary.AppendUvarint(refs, uint64(e.symbol(s)))
		}
		t := e.ts[:0]
		t = appendBytesField(t, 0x0a, refs) // labels_refs, packed
		var sample []byte
		var buf [1 + 8 + 1 + binary.MaxVarintLen64]byte
		sample = buf[:0]
		if bits := math.Float64bits(v); bits != 0 {
			sample = binary.LittleEndian.AppendUint64(append(sample, 0x09), bits)
		}
		if ts != 0 {
			sample = binary.AppendUvarint(append(sample, 0x10), uint64(ts))
		}
		t = appendBytesField(t, 0x12, sample)
		var meta [2 + 2*binary.MaxVarintLen64]byte
		m := binary.AppendUvarint(append(meta[:0], 0x08), uint64(MetricType(i)))
		m = binary.AppendUvarint(append(m, 0x18), uint64(e.symbol(Help(i))))
		t = appendBytesField(t, 0x2a, m) // metadata: always written (non-nullable)
		e.ts = t
		series = appendBytesField(series, 0x2a, t)
	}
	for _, s := range e.symList {
		b = append(binary.AppendUvarint(append(b, 0x22), uint64(len(s))), s...)
	}
	return append(b, series...)
}

// appendBytesField appends a length-delimited field with a one-byte tag,
// written even when empty.
func appendBytesField(b []byte, tag byte, v []byte) []byte {
	return append(binary.AppendUvarint(append(b, tag), uint64(len(v))), v...)
}
