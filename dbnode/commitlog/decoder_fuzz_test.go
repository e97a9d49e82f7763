package commitlog

import (
	"testing"
)

// FuzzDecode feeds arbitrary payloads to the record decoder: it must
// reject or accept them without panicking or allocating without bound.
func FuzzDecode(f *testing.F) {
	for _, b := range [][]Entry{
		makeBatch("default", "s", 5, 3, 100),
		makeBatch("other", "s", 3, 3, -100),
		{{Namespace: "", ID: nil, T: 0, V: 0}},
	} {
		rec := newEncoder().appendRecord(nil, b, nil) // the first record of a file
		f.Add(rec[frameHeaderSize:])
	}
	rec := newEncoder().appendRecord(nil, makeBatch("default", "s", 2, 2, 0), makeHists("default", "s", 4, 3, 10))
	f.Add(rec[frameHeaderSize:])
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, payload []byte) {
		d := decoder{version: fileVersion}
		if err := d.decode(payload); err != nil {
			return
		}
		if len(d.out)+len(d.hout) > len(payload) {
			t.Fatalf("%d entries from %d bytes", len(d.out), len(payload))
		}
		for _, e := range d.out {
			_ = e.ID // refs were checked: every entry resolved
		}
	})
}
