// badinput sends bad-input probes to a node's HTTP port, for measuring
// what they cost (scripts/badinput/rss.sh reads the node's resident
// memory around them):
//
//	go run ./scripts/badinput http://127.0.0.1:24100 idle    # 15 series
//	go run ./scripts/badinput http://127.0.0.1:24100 probes  # one of each
//	go run ./scripts/badinput http://127.0.0.1:24100 heavy   # 8 at once
//
// The probes: 32 MiB bodies of random bytes (remote write, OTLP), a
// request of 250,000 series (over limits.maxSeriesPerRequest), one series
// of 100,000 labels, and protobuf nested 260,000 deep.
package main

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
)

func post(url, ct string, body []byte, hdr map[string]string) {
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println("err", err)
		return
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(b) > 160 {
		b = b[:160]
	}
	fmt.Printf("%s %d bytes -> %d %s (%v)\n", url, len(body), resp.StatusCode, bytes.TrimSpace(b), time.Since(t0).Round(time.Millisecond))
}

func rw(base string, req *prompb.WriteRequest) {
	raw, err := req.Marshal()
	if err != nil {
		panic(err)
	}
	post(base+"/api/v1/prom/remote/write", "application/x-protobuf", snappy.Encode(nil, raw), map[string]string{"Content-Encoding": "snappy"})
}

func main() {
	base := os.Args[1]
	what := os.Args[2]
	now := time.Now().UnixMilli()
	switch what {
	case "idle": // 15 series
		req := &prompb.WriteRequest{}
		for i := 0; i < 15; i++ {
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "idle"}, {Name: "i", Value: strconv.Itoa(i)}},
				Samples: []prompb.Sample{{Timestamp: now, Value: float64(i)}}})
		}
		rw(base, req)
	case "heavy":
		big := &prompb.WriteRequest{}
		for i := 0; len(big.Timeseries) < 250_000; i++ {
			big.Timeseries = append(big.Timeseries, prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "big"}, {Name: "i", Value: strconv.Itoa(i)}, {Name: "pad", Value: string(bytes.Repeat([]byte("x"), 50))}},
				Samples: []prompb.Sample{{Timestamp: now, Value: 1}}})
		}
		raw, _ := big.Marshal()
		fmt.Println("big raw", len(raw))
		bigBody := snappy.Encode(nil, raw)
		ls := []prompb.Label{{Name: "__name__", Value: "wide"}}
		for i := 0; i < 100_000; i++ {
			ls = append(ls, prompb.Label{Name: fmt.Sprintf("l%06d", 100_000-i), Value: "v"})
		}
		wraw, _ := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: ls, Samples: []prompb.Sample{{Timestamp: now, Value: 1}}}}}).Marshal()
		wide := snappy.Encode(nil, wraw)
		rnd := make([]byte, 32<<20-16)
		rand.Read(rnd)
		done := make(chan bool)
		for g := 0; g < 8; g++ {
			go func() {
				post(base+"/api/v1/prom/remote/write", "application/x-protobuf", bigBody, map[string]string{"Content-Encoding": "snappy"})
				post(base+"/api/v1/prom/remote/write", "application/x-protobuf", wide, map[string]string{"Content-Encoding": "snappy"})
				post(base+"/api/v1/otlp/v1/metrics", "application/x-protobuf", rnd, nil)
				post(base+"/api/v1/prom/remote/write", "application/x-protobuf", rnd, map[string]string{"Content-Encoding": "snappy"})
				done <- true
			}()
		}
		for g := 0; g < 8; g++ {
			<-done
		}
	case "probes":
		// 1. A body at the max body size: random bytes (incompressible), and
		// a valid snappy body decompressing to ~32 MiB.
		rnd := make([]byte, 32<<20-16)
		rand.Read(rnd)
		post(base+"/api/v1/prom/remote/write", "application/x-protobuf", rnd, map[string]string{"Content-Encoding": "snappy"})
		post(base+"/api/v1/otlp/v1/metrics", "application/x-protobuf", rnd, nil)
		big := &prompb.WriteRequest{}
		for i := 0; len(big.Timeseries) < 300_000; i++ {
			big.Timeseries = append(big.Timeseries, prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "big"}, {Name: "i", Value: strconv.Itoa(i)}, {Name: "pad", Value: string(bytes.Repeat([]byte("x"), 60))}},
				Samples: []prompb.Sample{{Timestamp: now, Value: 1}}})
		}
		rw(base, big)
		// 2. 100,000 labels in one series.
		ls := []prompb.Label{{Name: "__name__", Value: "wide"}}
		for i := 0; i < 100_000; i++ {
			ls = append(ls, prompb.Label{Name: fmt.Sprintf("l%06d", 100_000-i), Value: "v"})
		}
		rw(base, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: ls, Samples: []prompb.Sample{{Timestamp: now, Value: 1}}}}})
		// 3. Deep nesting: length-delimited field 1 inside itself, 1M deep
		// as far as the body allows.
		var hdrs [][]byte
		n := 0
		for n < 1<<20 {
			hdr := []byte{0x0a}
			m := n
			for m >= 0x80 {
				hdr = append(hdr, byte(m)|0x80)
				m >>= 7
			}
			hdr = append(hdr, byte(m))
			hdrs = append(hdrs, hdr)
			n += len(hdr)
		}
		nest := make([]byte, 0, n)
		for i := len(hdrs) - 1; i >= 0; i-- {
			nest = append(nest, hdrs[i]...)
		}
		fmt.Println("nesting depth", len(hdrs))
		post(base+"/api/v1/prom/remote/write", "application/x-protobuf", snappy.Encode(nil, nest), map[string]string{"Content-Encoding": "snappy"})
		post(base+"/api/v1/otlp/v1/metrics", "application/x-protobuf", nest, nil)
		post(base+"/api/v1/prom/remote/write", "application/x-protobuf;proto=io.prometheus.write.v2.Request", snappy.Encode(nil, nest), map[string]string{"Content-Encoding": "snappy", "X-Prometheus-Remote-Write-Version": "2.0.0"})
	}
}
