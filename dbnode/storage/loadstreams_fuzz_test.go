package storage

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/ident"
)

// FuzzLoadStreams feeds LoadStreams stream bytes as a peer could send
// them: it never panics; a stream that does not decode fails with nothing
// written; one that decodes is written but for the samples refused (a
// RejectedError, e.g. timestamps far in the future), and the count says
// so.
//
//	go test -run XXX -fuzz FuzzLoadStreams -fuzztime 30s ./dbnode/storage/
func FuzzLoadStreams(f *testing.F) {
	base := ms(t0)
	enc := encoding.NewEncoder()
	for i := int64(0); i < 5; i++ {
		if err := enc.Append(base+i*10_000, float64(i)*1.5); err != nil {
			f.Fatal(err)
		}
	}
	f.Add(append([]byte(nil), enc.Bytes()...))
	f.Add([]byte{})
	f.Add([]byte{0xff, 0x00, 0x13})
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(f.TempDir(), clk)
	opts.NumShards = 1
	db, err := Open(opts)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = db.Close() })
	n := 0
	f.Fuzz(func(t *testing.T, stream []byte) {
		n++
		id := ident.FromLabels(labels.FromStrings("__name__", "fuzz", "i", strconv.Itoa(n)))
		want := 0
		it := encoding.NewIterator(stream)
		for it.Next() {
			want++
		}
		decodes := it.Err() == nil
		got, err := db.LoadStreams("default", 0, []SeriesStream{{ID: id, Stream: stream}})
		var rej *RejectedError
		switch {
		case !decodes:
			if err == nil || got != 0 {
				t.Fatalf("a stream that does not decode: got %d samples, err %v", got, err)
			}
		case errors.As(err, &rej):
			if got != want-rej.Total {
				t.Fatalf("%d of %d samples refused, but %d reported written", rej.Total, want, got)
			}
		case err != nil:
			t.Fatalf("a decodable stream failed: %v", err)
		case got != want:
			t.Fatalf("loaded %d samples, the stream holds %d", got, want)
		}
	})
}
