package commitlog

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// FuzzReplayFile feeds arbitrary bytes to replay as a commit log file
// (in memory: scan is the reader behind Open). It must never panic or
// fail with anything but an unsupported version; the damage it reports
// must lie inside the file, in order; and the rewrite salvage makes of a
// damaged file must be clean and replay to exactly the same entries.
func FuzzReplayFile(f *testing.F) {
	path := writeLog(f, f.TempDir(),
		makeBatch("default", "s", 5, 3, 100),
		makeBatch("other", "s", 3, 3, -100),
		makeBatch("default", "t", 7, 7, 1000))
	file, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(file)
	for _, off := range []int{2, 25, 40, 90, len(file) - 3} {
		b := append([]byte(nil), file...)
		b[off] ^= 0x20
		f.Add(b)
	}
	f.Add(file[:len(file)/2])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		const seq = 1 // the seq a file name would give
		collect := func(out *[]rec) func([]Entry, []HistEntry) error {
			return func(es []Entry, hs []HistEntry) error {
				for _, e := range es {
					*out = append(*out, toRec(e))
				}
				for _, e := range hs {
					*out = append(*out, toHistRec(e))
				}
				return nil
			}
		}
		var got []rec
		s, err := scan(bytes.NewReader(data), int64(len(data)), seq, collect(&got))
		if err != nil {
			if strings.Contains(err.Error(), "unsupported commit log version") {
				return // a valid header of a newer version: refused, as it must be
			}
			t.Fatalf("scan: %v", err)
		}
		if s.good > s.size || len(got) != s.entries || len(got) > len(data) {
			t.Fatalf("inconsistent scan: good %d size %d entries %d/%d", s.good, s.size, s.entries, len(got))
		}
		last := int64(0)
		for _, sp := range s.skipped {
			if sp.Start < last || sp.End <= sp.Start || sp.End > s.size {
				t.Fatalf("bad span %+v after %d in %d bytes", sp, last, s.size)
			}
			last = sp.End
		}
		if len(s.skipped) == 0 {
			return
		}
		var clean bytes.Buffer
		if err := rewriteFrom(bytes.NewReader(data), int64(len(data)), seq, &clean); err != nil {
			t.Fatalf("rewrite: %v", err)
		}
		var again []rec
		s2, err := scan(bytes.NewReader(clean.Bytes()), int64(clean.Len()), seq, collect(&again))
		if err != nil || len(s2.skipped) != 0 || s2.badTail != nil {
			t.Fatalf("rewritten file not clean: err %v skipped %v tail %v", err, s2.skipped, s2.badTail)
		}
		if len(again) != len(got) {
			t.Fatalf("rewritten file replays %d entries, want %d", len(again), len(got))
		}
		for i := range got {
			if got[i] != again[i] {
				t.Fatalf("entry %d: %+v after rewrite, want %+v", i, again[i], got[i])
			}
		}
	})
}
