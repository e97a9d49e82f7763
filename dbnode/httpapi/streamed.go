package httpapi

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"

	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

// StreamedContentType is the remote read STREAMED_XOR_CHUNKS response type.
const StreamedContentType = "application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse"

// samplesPerChunk matches Prometheus' head chunks.
const samplesPerChunk = 120

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// wantsStreamed reports whether the client prefers STREAMED_XOR_CHUNKS:
// the first response type it accepts that we serve wins, as in Prometheus.
func wantsStreamed(req *prompb.ReadRequest) bool {
	for _, t := range req.AcceptedResponseTypes {
		switch t {
		case prompb.ReadRequest_STREAMED_XOR_CHUNKS:
			return true
		case prompb.ReadRequest_SAMPLES:
			return false
		}
	}
	return false
}

// writeFrame writes one frame: uvarint length, CRC32-Castagnoli (big
// endian) of the data, the marshalled ChunkedReadResponse.
func writeFrame(w io.Writer, resp *prompb.ChunkedReadResponse, buf []byte) ([]byte, error) {
	data, err := resp.Marshal()
	if err != nil {
		return buf, fmt.Errorf("marshal chunked read response: %w", err)
	}
	buf = binary.AppendUvarint(buf[:0], uint64(len(data)))
	buf = binary.BigEndian.AppendUint32(buf, crc32.Checksum(data, castagnoli))
	if _, err := w.Write(buf); err != nil {
		return buf, err
	}
	_, err = w.Write(data)
	return buf, err
}

// streamSeries writes one query's series as chunks, one frame per
// series, flushing as it goes so the client decodes while we read. Float
// samples go into XOR chunks, native histograms into Prometheus' histogram
// and float histogram chunks (tsdb/chunkenc), in time order: a new chunk
// starts where the type changes, after 120 samples, and where the
// histogram appender asks for one (a counter reset, a schema change).
func streamSeries(w http.ResponseWriter, queryIndex int, series []storage.SeriesIterator, buf []byte) ([]byte, error) {
	flusher, _ := w.(http.Flusher)
	for _, s := range series {
		cs := &prompb.ChunkedSeries{}
		if err := ident.Range(s.ID, func(n, v []byte) {
			cs.Labels = append(cs.Labels, prompb.Label{Name: string(n), Value: string(v)})
		}); err != nil {
			return buf, err
		}
		var err error
		if cs.Chunks, err = seriesChunks(s); err != nil {
			return buf, err
		}
		if len(cs.Chunks) == 0 {
			continue
		}
		if buf, err = writeFrame(w, &prompb.ChunkedReadResponse{ChunkedSeries: []*prompb.ChunkedSeries{cs}, QueryIndex: int64(queryIndex)}, buf); err != nil {
			return buf, err
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
	return buf, nil
}

// seriesChunks encodes one series' samples of every type as chunks.
func seriesChunks(s storage.SeriesIterator) ([]prompb.Chunk, error) {
	var (
		out        []prompb.Chunk
		chunk      chunkenc.Chunk
		app        chunkenc.Appender
		typ        chunkenc.ValueType
		minT, maxT int64
	)
	flush := func() {
		if chunk != nil && chunk.NumSamples() > 0 {
			out = append(out, prompb.Chunk{MinTimeMs: minT, MaxTimeMs: maxT, Type: chunkEncoding(typ), Data: chunk.Bytes()})
		}
		chunk = nil
	}
	it := s.Samples()
	for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
		t := it.AtT()
		var prev chunkenc.Appender
		if chunk != nil && (vt != typ || chunk.NumSamples() >= samplesPerChunk) {
			if vt == typ {
				prev = app // the next chunk's reset header is computed against it
			}
			flush()
		}
		if chunk == nil {
			switch vt {
			case chunkenc.ValFloat:
				chunk = chunkenc.NewXORChunk()
			case chunkenc.ValHistogram:
				chunk = chunkenc.NewHistogramChunk()
			default:
				chunk = chunkenc.NewFloatHistogramChunk()
			}
			var err error
			if app, err = chunk.Appender(); err != nil {
				return nil, err
			}
			typ, minT = vt, t
		}
		var (
			next    chunkenc.Chunk
			recoded bool
			err     error
		)
		switch vt {
		case chunkenc.ValFloat:
			_, v := it.At()
			app.Append(0, t, v)
		case chunkenc.ValHistogram:
			_, h := it.AtHistogram(nil) // a fresh histogram: the appender may adjust its spans
			next, recoded, app, err = app.AppendHistogram(prev, 0, t, h, false)
		default:
			_, h := it.AtFloatHistogram(nil)
			next, recoded, app, err = app.AppendFloatHistogram(prev, 0, t, h, false)
		}
		if err != nil {
			return nil, fmt.Errorf("encode histogram chunk: %w", err)
		}
		switch {
		case next != nil && recoded:
			chunk = next // the same samples, re-encoded with new buckets
		case next != nil:
			flush()
			chunk, minT = next, t
		}
		maxT = t
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	flush()
	return out, nil
}

func chunkEncoding(vt chunkenc.ValueType) prompb.Chunk_Encoding {
	switch vt {
	case chunkenc.ValHistogram:
		return prompb.Chunk_HISTOGRAM
	case chunkenc.ValFloatHistogram:
		return prompb.Chunk_FLOAT_HISTOGRAM
	}
	return prompb.Chunk_XOR
}
