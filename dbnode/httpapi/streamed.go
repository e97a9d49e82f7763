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

// streamSeries writes one query's series as XOR chunks, one frame per
// series, flushing as it goes so the client decodes while we read.
func streamSeries(w http.ResponseWriter, queryIndex int, series []storage.SeriesIterator, buf []byte) ([]byte, error) {
	flusher, _ := w.(http.Flusher)
	for _, s := range series {
		cs := &prompb.ChunkedSeries{}
		if err := ident.Range(s.ID, func(n, v []byte) {
			cs.Labels = append(cs.Labels, prompb.Label{Name: string(n), Value: string(v)})
		}); err != nil {
			return buf, err
		}
		var chunk *chunkenc.XORChunk
		var app chunkenc.Appender
		var minT, maxT int64
		flushChunk := func() {
			if chunk != nil && chunk.NumSamples() > 0 {
				cs.Chunks = append(cs.Chunks, prompb.Chunk{MinTimeMs: minT, MaxTimeMs: maxT, Type: prompb.Chunk_XOR, Data: chunk.Bytes()})
			}
			chunk = nil
		}
		for s.Values.Next() {
			t, v := s.Values.At()
			if chunk == nil {
				chunk = chunkenc.NewXORChunk()
				var err error
				if app, err = chunk.Appender(); err != nil {
					return buf, err
				}
				minT = t
			}
			app.Append(0, t, v)
			maxT = t
			if chunk.NumSamples() >= samplesPerChunk {
				flushChunk()
			}
		}
		if err := s.Values.Err(); err != nil {
			return buf, err
		}
		flushChunk()
		if len(cs.Chunks) == 0 {
			continue
		}
		var err error
		if buf, err = writeFrame(w, &prompb.ChunkedReadResponse{ChunkedSeries: []*prompb.ChunkedSeries{cs}, QueryIndex: int64(queryIndex)}, buf); err != nil {
			return buf, err
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
	return buf, nil
}
