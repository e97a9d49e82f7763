package memsnap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"
)

func sampleHeader() Header {
	return Header{
		CreatedMs: 1700000000000, NumShards: 8, CoveredSeq: 7,
		Files: []File{{Seq: 6, Ranges: []Range{{Namespace: "default", Min: 10, Max: 20}}}, {Seq: 7}},
		Namespaces: []Namespace{
			{Name: "default", Values: []BlockValues{
				{Start: 7200000, Names: []NameValues{{Name: "job", Values: 1}, {Name: "series", Values: 10_000_000}}},
				{Start: 14400000},
			}},
			{Name: "other"},
		},
	}
}

type sec struct {
	ns     uint16
	series []Series
}

func sampleSections() []sec {
	return []sec{
		{0, []Series{
			{Shard: 1, ID: []byte("a"), Floats: []byte{1, 2, 3}},
			{Shard: 7, ID: []byte("b"), Histograms: [][]byte{{9}, {8, 7}}},
			{Shard: 1, ID: []byte("c"), Floats: []byte{4}, Histograms: [][]byte{{5}}},
		}},
		{1, []Series{{Shard: 7, ID: []byte("z"), Floats: []byte{6, 6}}}},
	}
}

func encode(t testing.TB, h Header, secs []sec) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, h)
	for _, s := range secs {
		w.BeginSection(s.ns)
		for _, x := range s.series {
			w.Add(x.Shard, x.ID, x.Floats, x.Histograms)
		}
		if err := w.EndSection(); err != nil {
			t.Fatal(err)
		}
	}
	// An empty section is not written.
	w.BeginSection(0)
	if err := w.EndSection(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func collect(t testing.TB, snap *Snapshot) []sec {
	t.Helper()
	var out []sec
	for _, s := range snap.Sections {
		got := sec{ns: s.NS}
		err := s.Each(func(x Series) error {
			c := Series{Shard: x.Shard, ID: x.ID, Floats: x.Floats}
			for _, h := range x.Histograms {
				c.Histograms = append(c.Histograms, h)
			}
			got.series = append(got.series, c)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, got)
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	h, secs := sampleHeader(), sampleSections()
	b := encode(t, h, secs)
	snap, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snap.Header, h) {
		t.Fatalf("header\n got %+v\nwant %+v", snap.Header, h)
	}
	if got := collect(t, snap); !reflect.DeepEqual(got, secs) {
		t.Fatalf("sections\n got %+v\nwant %+v", got, secs)
	}
	if snap.Series != 4 {
		t.Fatalf("series %d, want 4", snap.Series)
	}
}

// Every truncation and every single flipped byte is refused: a snapshot
// is used whole or not at all.
func TestEveryDamageIsRefused(t *testing.T) {
	b := encode(t, sampleHeader(), sampleSections())
	for n := range len(b) {
		if _, err := Decode(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d of %d bytes: err %v, want ErrCorrupt", n, len(b), err)
		}
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x5a
		if _, err := Decode(c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: err %v, want ErrCorrupt", i, err)
		}
	}
	if _, err := Decode(append(bytes.Clone(b), 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("trailing byte: err %v, want ErrCorrupt", err)
	}
}

// Sections are checked on several goroutines: with many sections, each
// damaged one is refused and named, and of two damaged ones the first
// in the file is named, as a check in file order names it.
func TestManySectionsDamageNamesTheFirst(t *testing.T) {
	h := sampleHeader()
	var secs []sec
	for i := range 40 {
		secs = append(secs, sec{ns: uint16(i % 2), series: []Series{
			{Shard: uint32(i % 8), ID: []byte{byte('a' + i%26), byte(i)}, Floats: bytes.Repeat([]byte{byte(i)}, 50+i)}}})
	}
	b := encode(t, h, secs)
	snap, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(t, snap); !reflect.DeepEqual(got, secs) {
		t.Fatalf("sections differ")
	}
	// Where each section's float bytes are: its repeated byte.
	at := func(i int) int {
		return bytes.Index(b, bytes.Repeat([]byte{byte(i)}, 50+i))
	}
	for _, pair := range [][2]int{{3, 30}, {17, 18}, {39, 39}} {
		c := bytes.Clone(b)
		c[at(pair[0])] ^= 0xff
		c[at(pair[1])+1] ^= 0xff
		_, err := Decode(c)
		want := fmt.Sprintf("section %d checksum mismatch", pair[0])
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
			t.Fatalf("sections %v damaged: err %v, want %q", pair, err, want)
		}
	}
}

func TestSectionOutOfRangeRefused(t *testing.T) {
	h := sampleHeader()
	b := encode(t, h, []sec{{ns: 2, series: []Series{{ID: []byte("a")}}}})
	if _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("namespace out of range: %v", err)
	}
	b = encode(t, h, []sec{{ns: 0, series: []Series{{ID: []byte("a")}, {Shard: 8, ID: []byte("b")}}}})
	if _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("shard out of range: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(encode(f, sampleHeader(), sampleSections()))
	f.Add(encode(f, Header{NumShards: 1, Namespaces: []Namespace{{Name: "x"}}}, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		snap, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not wrapping ErrCorrupt: %v", err)
			}
			return
		}
		roundTrip(t, snap)
	})
}

// roundTrip re-encodes what decoded and checks it decodes the same.
func roundTrip(t *testing.T, snap *Snapshot) {
	secs := collect(t, snap)
	var buf bytes.Buffer
	w := NewWriter(&buf, snap.Header)
	for _, s := range secs {
		w.BeginSection(s.ns)
		for _, x := range s.series {
			w.Add(x.Shard, x.ID, x.Floats, x.Histograms)
		}
		if err := w.EndSection(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Decode(buf.Bytes())
	if err != nil {
		t.Fatalf("re-encoded snapshot does not decode: %v", err)
	}
	if !reflect.DeepEqual(again.Header, snap.Header) || !reflect.DeepEqual(collect(t, again), secs) {
		t.Fatal("re-encoded snapshot decodes differently")
	}
}

// FuzzSection fuzzes a section's body behind its checksum (which the
// mutations of FuzzDecode rarely get past): checkSection must refuse or
// accept it without panicking, and Each must then walk it without error.
func FuzzSection(f *testing.F) {
	h := sampleHeader()
	b := encode(f, h, sampleSections())
	snap, err := Decode(b)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range snap.Sections {
		body := binary.LittleEndian.AppendUint16(nil, s.NS)
		body = append(body, s.body...)
		body = binary.LittleEndian.AppendUint32(body, s.Count)
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := checkSection(body, h, Version)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not wrapping ErrCorrupt: %v", err)
			}
			return
		}
		n := uint32(0)
		if err := s.Each(func(Series) error { n++; return nil }); err != nil {
			t.Fatalf("checked section fails Each: %v", err)
		}
		if n != s.Count {
			t.Fatalf("Each gave %d series, section says %d", n, s.Count)
		}
	})
}

// encodeV1 writes secs as version 1 did: one shard a section (the shard
// of its first series, which all its series must share).
// encodeOld writes secs as version (1 or 2) did: no label value counts
// in the header (the decoded header has none); in version 1 one shard a
// section, given once, in version 2 a shard before each series.
func encodeOld(t testing.TB, h Header, secs []sec, version uint32) []byte {
	t.Helper()
	body := appendHeader(nil, h, version)
	b := append(headMagic[:0:0], headMagic[:]...)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(body)))
	b = append(b, body...)
	crc := crc32.Checksum(b, castagnoli)
	b = binary.LittleEndian.AppendUint32(b, crc)
	chain := chainCRC(0, crc)
	var series uint64
	for _, s := range secs {
		sb := binary.LittleEndian.AppendUint16(nil, s.ns)
		if version == 1 {
			sb = binary.LittleEndian.AppendUint32(sb, s.series[0].Shard)
		}
		for _, x := range s.series {
			if version == 1 && x.Shard != s.series[0].Shard {
				t.Fatal("a version 1 section holds one shard")
			}
			if version > 1 {
				sb = binary.AppendUvarint(sb, uint64(x.Shard))
			}
			sb = appendBytes(sb, x.ID)
			sb = appendBytes(sb, x.Floats)
			sb = binary.AppendUvarint(sb, uint64(len(x.Histograms)))
			for _, hs := range x.Histograms {
				sb = appendBytes(sb, hs)
			}
		}
		sb = binary.LittleEndian.AppendUint32(sb, uint32(len(s.series)))
		crc := crc32.Checksum(sb, castagnoli)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(sb)))
		b = append(b, sb...)
		b = binary.LittleEndian.AppendUint32(b, crc)
		chain = chainCRC(chain, crc)
		series += uint64(len(s.series))
	}
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = append(b, endMagic[:]...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(secs)))
	b = binary.LittleEndian.AppendUint64(b, series)
	return binary.LittleEndian.AppendUint32(b, chain)
}

// A version 1 snapshot, left by the release before, still loads: each
// series gets its section's shard. Damage to it is refused as to the
// current version.
func TestVersion1StillDecodes(t *testing.T) {
	h := sampleHeader()
	secs := []sec{
		{0, []Series{{Shard: 1, ID: []byte("a"), Floats: []byte{1, 2, 3}}, {Shard: 1, ID: []byte("c"), Histograms: [][]byte{{5}}}}},
		{1, []Series{{Shard: 7, ID: []byte("z"), Floats: []byte{6, 6}}}},
	}
	b := encodeOld(t, h, secs, 1)
	snap, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(t, snap); !reflect.DeepEqual(got, secs) {
		t.Fatalf("sections\n got %+v\nwant %+v", got, secs)
	}
	if snap.Header.Namespaces[0].Values != nil {
		t.Fatalf("version 1 has no label value counts: %+v", snap.Header.Namespaces[0])
	}
	bad := encodeOld(t, Header{NumShards: 7, Namespaces: h.Namespaces}, secs, 1)
	if _, err := Decode(bad); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "shard 7 out of range") {
		t.Fatalf("version 1 section of shard 7 of 7: err %v", err)
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x5a
		if _, err := Decode(c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: err %v, want ErrCorrupt", i, err)
		}
	}
	b[4] = Version + 1 // a version this release does not read
	if _, err := Decode(b); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("version %d", Version+1)) {
		t.Fatalf("version %d: err %v", Version+1, err)
	}
}

// A version 2 snapshot (sections of any shards, no label value counts)
// still loads, series by series as written.
func TestVersion2StillDecodes(t *testing.T) {
	h, secs := sampleHeader(), sampleSections()
	snap, err := Decode(encodeOld(t, h, secs, 2))
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(t, snap); !reflect.DeepEqual(got, secs) {
		t.Fatalf("sections\n got %+v\nwant %+v", got, secs)
	}
	for _, ns := range snap.Header.Namespaces {
		if ns.Values != nil {
			t.Fatalf("version 2 has no label value counts: %+v", ns)
		}
	}
}
