package rpc

import "encoding/binary"

// Matcher is a label matcher on the wire; Type is a labels.MatchType
// (0 =, 1 !=, 2 =~, 3 !~).
type Matcher struct {
	Type  uint8
	Name  string
	Value string
}

// FetchTaggedRequest asks for the series of Namespace matching all Matchers
// with samples in [Start, End] (unix ms, inclusive).
type FetchTaggedRequest struct {
	Namespace string
	Matchers  []Matcher
	Start     int64
	End       int64
	// Shards restricts the answer to these shards, each of which the node
	// must be allowed to read. Empty means every shard the node may read.
	Shards []uint32
}

// FetchRequest asks for the samples of the given series IDs in [Start,
// End] (unix ms, inclusive).
type FetchRequest struct {
	Namespace string
	IDs       [][]byte
	Start     int64
	End       int64
}

// FetchedSeries is one series of a fetch: its samples in the range as an
// encoding stream (encoding.NewIterator reads it; empty means no samples).
type FetchedSeries struct {
	ID     []byte
	Shard  uint32
	Stream []byte
}

// FetchResponse answers both fetches. For FetchRequest it holds one series
// per requested ID, in request order; for FetchTaggedRequest one per
// matching series with samples in the range, in no particular order.
type FetchResponse struct {
	Series []FetchedSeries
}

// Size implements Message.
func (m *FetchTaggedRequest) Size() int {
	n := 1 + bytesLen(len(m.Namespace)) + uvarintLen(uint64(len(m.Matchers)))
	for _, mt := range m.Matchers {
		n += 1 + bytesLen(len(mt.Name)) + bytesLen(len(mt.Value))
	}
	n += varintLen(m.Start) + varintLen(m.End) + uvarintLen(uint64(len(m.Shards)))
	for _, s := range m.Shards {
		n += uvarintLen(uint64(s))
	}
	return n
}

// MarshalAppend implements Message. Layout: version, namespace, matcher
// count, matchers (type byte, name, value), start, end (zigzag varints),
// shard count, shards (uvarints).
func (m *FetchTaggedRequest) MarshalAppend(dst []byte) []byte {
	dst = append(dst, wireVersion)
	dst = appendString(dst, m.Namespace)
	dst = binary.AppendUvarint(dst, uint64(len(m.Matchers)))
	for _, mt := range m.Matchers {
		dst = append(dst, mt.Type)
		dst = appendString(dst, mt.Name)
		dst = appendString(dst, mt.Value)
	}
	dst = appendVarint(dst, m.Start)
	dst = appendVarint(dst, m.End)
	dst = binary.AppendUvarint(dst, uint64(len(m.Shards)))
	for _, s := range m.Shards {
		dst = binary.AppendUvarint(dst, uint64(s))
	}
	return dst
}

// Unmarshal implements Message.
func (m *FetchTaggedRequest) Unmarshal(b []byte) error {
	r := newReader("FetchTaggedRequest", b)
	m.Namespace = r.string("namespace")
	m.Matchers = nil
	if n := r.count("matcher count", 3); n > 0 {
		m.Matchers = make([]Matcher, n)
		for i := range m.Matchers {
			m.Matchers[i] = Matcher{Type: r.u8("matcher type"), Name: r.string("matcher name"), Value: r.string("matcher value")}
		}
	}
	m.Start = r.varint("start")
	m.End = r.varint("end")
	m.Shards = nil
	if n := r.count("shard count", 1); n > 0 {
		m.Shards = make([]uint32, n)
		for i := range m.Shards {
			m.Shards[i] = r.u32("shard")
		}
	}
	return r.done()
}

// Size implements Message.
func (m *FetchRequest) Size() int {
	n := 1 + bytesLen(len(m.Namespace)) + uvarintLen(uint64(len(m.IDs)))
	for _, id := range m.IDs {
		n += bytesLen(len(id))
	}
	return n + varintLen(m.Start) + varintLen(m.End)
}

// MarshalAppend implements Message. Layout: version, namespace, ID count,
// IDs, start, end.
func (m *FetchRequest) MarshalAppend(dst []byte) []byte {
	dst = append(dst, wireVersion)
	dst = appendString(dst, m.Namespace)
	dst = binary.AppendUvarint(dst, uint64(len(m.IDs)))
	for _, id := range m.IDs {
		dst = appendBytes(dst, id)
	}
	dst = appendVarint(dst, m.Start)
	return appendVarint(dst, m.End)
}

// Unmarshal implements Message.
func (m *FetchRequest) Unmarshal(b []byte) error {
	r := newReader("FetchRequest", b)
	m.Namespace = r.string("namespace")
	m.IDs = nil
	if n := r.count("id count", 1); n > 0 {
		m.IDs = make([][]byte, n)
		for i := range m.IDs {
			m.IDs[i] = r.bytes("id")
		}
	}
	m.Start = r.varint("start")
	m.End = r.varint("end")
	return r.done()
}

func (s *FetchedSeries) size() int {
	return bytesLen(len(s.ID)) + uvarintLen(uint64(s.Shard)) + bytesLen(len(s.Stream))
}

// Size implements Message.
func (m *FetchResponse) Size() int {
	n := 1 + uvarintLen(uint64(len(m.Series)))
	for i := range m.Series {
		n += m.Series[i].size()
	}
	return n
}

// MarshalAppend implements Message. Layout: version, series count, then
// per series: ID, shard, stream.
func (m *FetchResponse) MarshalAppend(dst []byte) []byte {
	dst = append(dst, wireVersion)
	dst = binary.AppendUvarint(dst, uint64(len(m.Series)))
	for i := range m.Series {
		s := &m.Series[i]
		dst = appendBytes(dst, s.ID)
		dst = binary.AppendUvarint(dst, uint64(s.Shard))
		dst = appendBytes(dst, s.Stream)
	}
	return dst
}

// Unmarshal implements Message. IDs and streams alias b.
func (m *FetchResponse) Unmarshal(b []byte) error {
	r := newReader("FetchResponse", b)
	m.Series = nil
	if n := r.count("series count", 3); n > 0 {
		m.Series = make([]FetchedSeries, n)
		for i := range m.Series {
			s := &m.Series[i]
			s.ID = r.bytes("series id")
			s.Shard = r.u32("shard")
			s.Stream = r.bytes("stream")
		}
	}
	return r.done()
}
