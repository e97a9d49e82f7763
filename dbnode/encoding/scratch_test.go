package encoding

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/tessera-tsdb/tessera/dbnode/encoding/encodingtest"
)

func TestScratchSizes(t *testing.T) {
	data := encodingtest.NodeExporter(encodingtest.DefaultNodeExporter)
	type agg struct{ n, ours, xor, series, sealed int }
	var sealedAll, streamAll [][]byte
	kinds := map[string]*agg{}
	tot := &agg{}
	for _, s := range data {
		e := NewEncoder()
		c := chunkenc.NewXORChunk()
		app, _ := c.Appender()
		for i := range s.T {
			if err := e.Append(s.T[i], s.V[i]); err != nil {
				t.Fatal(err)
			}
			app.Append(0, s.T[i], s.V[i])
		}
		it := NewIterator(e.Bytes())
		i := 0
		for it.Next() {
			tt, v := it.At()
			if tt != s.T[i] || math.Float64bits(v) != math.Float64bits(s.V[i]) {
				t.Fatalf("%s sample %d: got %d %v want %d %v", s.Labels, i, tt, v, s.T[i], s.V[i])
			}
			i++
		}
		if it.Err() != nil || i != len(s.T) {
			t.Fatal(it.Err(), i)
		}
		sealed, err := Seal(e.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		sealedAll = append(sealedAll, sealed)
		streamAll = append(streamAll, slices.Clone(e.Bytes()))
		it = NewSealedIterator(sealed)
		i = 0
		for it.Next() {
			tt, v := it.At()
			if tt != s.T[i] || math.Float64bits(v) != math.Float64bits(s.V[i]) {
				t.Fatalf("sealed %s sample %d: got %d %v want %d %v", s.Labels, i, tt, v, s.T[i], s.V[i])
			}
			i++
		}
		if it.Err() != nil || i != len(s.T) {
			t.Fatal(it.Err(), i)
		}
		k := kinds[s.Kind]
		if k == nil {
			k = &agg{}
			kinds[s.Kind] = k
		}
		for _, a := range []*agg{k, tot} {
			a.n += len(s.T)
			a.ours += len(e.Bytes())
			a.xor += len(c.Bytes())
			a.series++
			a.sealed += len(sealed)
		}
	}
	names := []string{}
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		a := kinds[k]
		fmt.Printf("%-12s series=%5d ours=%.3f xor=%.3f sealed=%.3f\n", k, a.series, float64(a.ours)/float64(a.n), float64(a.xor)/float64(a.n), float64(a.sealed)/float64(a.n))
	}
	fmt.Printf("%-12s series=%5d ours=%.3f xor=%.3f sealed=%.3f samples=%d\n", "TOTAL", tot.series, float64(tot.ours)/float64(tot.n), float64(tot.xor)/float64(tot.n), float64(tot.sealed)/float64(tot.n), tot.n)
	for _, lvl := range []zstd.EncoderLevel{zstd.SpeedDefault, zstd.SpeedBetterCompression, zstd.SpeedBestCompression} {
		enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(lvl))
		for name, all := range map[string][][]byte{"sealed": sealedAll, "stream": streamAll} {
		var page []byte
		total, pages := 0, 0
		flush := func() {
			if len(page) > 0 {
				total += len(enc.EncodeAll(page, nil))
				pages++
			}
			page = page[:0]
		}
		for _, p := range all {
			if len(page)+len(p) > 64<<10 {
				flush()
			}
			page = append(page, p...)
		}
		flush()
		fmt.Printf("%s zstd %v: pages=%d %.3f B/sample\n", name, lvl, pages, float64(total)/float64(tot.n))
		single := 0
		for _, p := range all {
			single += len(enc.EncodeAll(p, nil))
		}
		fmt.Printf("%s zstd %v per series: %.3f B/sample\n", name, lvl, float64(single)/float64(tot.n))
		}
	}
}
