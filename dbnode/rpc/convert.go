package rpc

import (
	"math"

	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
)

// The generated messages of nodepb are the wire; the structs of this
// package are what callers see. These functions convert between the two.
// Byte slices are shared, never copied: a message built from a struct
// aliases its IDs and streams, and a struct built from a received message
// owns what the message owned.

func matchersToPB(ms []Matcher) []*nodepb.Matcher {
	if len(ms) == 0 {
		return nil
	}
	out := make([]*nodepb.Matcher, len(ms))
	pbs := make([]nodepb.Matcher, len(ms))
	for i, m := range ms {
		pbs[i] = nodepb.Matcher{Type: nodepb.MatchType(m.Type), Name: m.Name, Value: m.Value}
		out[i] = &pbs[i]
	}
	return out
}

func matchersFromPB(ms []*nodepb.Matcher) []Matcher {
	if len(ms) == 0 {
		return nil
	}
	out := make([]Matcher, len(ms))
	for i, m := range ms {
		t := m.GetType()
		if t < 0 || t > math.MaxUint8 {
			// Out of uint8 range: keep it unknown rather than wrap it
			// around to a valid type; the server refuses it by number.
			t = math.MaxUint8
		}
		out[i] = Matcher{Type: uint8(t), Name: m.GetName(), Value: m.GetValue()}
	}
	return out
}

func (m *FetchTaggedRequest) toPB() *nodepb.FetchTaggedRequest {
	return &nodepb.FetchTaggedRequest{Namespace: m.Namespace, Matchers: matchersToPB(m.Matchers),
		Start: m.Start, End: m.End, Shards: m.Shards, AcceptHistograms: m.AcceptHistograms, RollupWindows: m.RollupWindows}
}

func fetchTaggedFromPB(p *nodepb.FetchTaggedRequest) *FetchTaggedRequest {
	return &FetchTaggedRequest{Namespace: p.GetNamespace(), Matchers: matchersFromPB(p.GetMatchers()),
		Start: p.GetStart(), End: p.GetEnd(), Shards: p.GetShards(), AcceptHistograms: p.GetAcceptHistograms(),
		RollupWindows: p.GetRollupWindows()}
}

func (m *FetchRequest) toPB() *nodepb.FetchRequest {
	return &nodepb.FetchRequest{Namespace: m.Namespace, Ids: m.IDs, Start: m.Start, End: m.End, AcceptHistograms: m.AcceptHistograms}
}

func fetchFromPB(p *nodepb.FetchRequest) *FetchRequest {
	return &FetchRequest{Namespace: p.GetNamespace(), IDs: p.GetIds(), Start: p.GetStart(), End: p.GetEnd(), AcceptHistograms: p.GetAcceptHistograms()}
}

func fetchedSeriesToPB(ss []FetchedSeries) []*nodepb.FetchedSeries {
	if len(ss) == 0 {
		return nil
	}
	out := make([]*nodepb.FetchedSeries, len(ss))
	pbs := make([]nodepb.FetchedSeries, len(ss))
	for i, s := range ss {
		pbs[i] = nodepb.FetchedSeries{Id: s.ID, Shard: s.Shard, Stream: s.Stream, Histograms: s.Histograms, Rollup: s.Rollup}
		out[i] = &pbs[i]
	}
	return out
}

func fetchedSeriesFromPB(ss []*nodepb.FetchedSeries) []FetchedSeries {
	if len(ss) == 0 {
		return nil
	}
	out := make([]FetchedSeries, len(ss))
	for i, s := range ss {
		out[i] = FetchedSeries{ID: s.GetId(), Shard: s.GetShard(), Stream: s.GetStream(), Histograms: s.GetHistograms(), Rollup: s.GetRollup()}
	}
	return out
}

func (m *FetchResponse) toPB() *nodepb.FetchResponse {
	return &nodepb.FetchResponse{Series: fetchedSeriesToPB(m.Series)}
}

func fetchResponseFromPB(p *nodepb.FetchResponse) *FetchResponse {
	return &FetchResponse{Series: fetchedSeriesFromPB(p.GetSeries())}
}

func (m *HealthResponse) toPB() *nodepb.HealthResponse {
	return &nodepb.HealthResponse{NodeId: m.NodeID, Ready: m.Ready, Message: m.Message}
}

func healthFromPB(p *nodepb.HealthResponse) *HealthResponse {
	return &HealthResponse{NodeID: p.GetNodeId(), Ready: p.GetReady(), Message: p.GetMessage()}
}

func (m *BlockMetadataRequest) toPB() *nodepb.BlockMetadataRequest {
	return &nodepb.BlockMetadataRequest{Namespace: m.Namespace, Shards: m.Shards}
}

func blockMetadataRequestFromPB(p *nodepb.BlockMetadataRequest) *BlockMetadataRequest {
	return &BlockMetadataRequest{Namespace: p.GetNamespace(), Shards: p.GetShards()}
}

func (m *BlockMetadataResponse) toPB() *nodepb.BlockMetadataResponse {
	if len(m.Shards) == 0 {
		return &nodepb.BlockMetadataResponse{}
	}
	out := &nodepb.BlockMetadataResponse{Shards: make([]*nodepb.ShardBlocks, len(m.Shards))}
	for i, sb := range m.Shards {
		p := &nodepb.ShardBlocks{Shard: sb.Shard}
		if len(sb.Blocks) > 0 {
			p.Blocks = make([]*nodepb.BlockMeta, len(sb.Blocks))
			metas := make([]nodepb.BlockMeta, len(sb.Blocks))
			for j, b := range sb.Blocks {
				metas[j] = nodepb.BlockMeta{BlockStart: b.BlockStart, Volume: b.Volume,
					Series: b.Series, Samples: b.Samples, Digest: b.Digest}
				p.Blocks[j] = &metas[j]
			}
		}
		out.Shards[i] = p
	}
	return out
}

func blockMetadataResponseFromPB(p *nodepb.BlockMetadataResponse) *BlockMetadataResponse {
	out := &BlockMetadataResponse{}
	if len(p.GetShards()) == 0 {
		return out
	}
	out.Shards = make([]ShardBlocks, len(p.GetShards()))
	for i, sb := range p.GetShards() {
		s := ShardBlocks{Shard: sb.GetShard()}
		if len(sb.GetBlocks()) > 0 {
			s.Blocks = make([]BlockMeta, len(sb.GetBlocks()))
			for j, b := range sb.GetBlocks() {
				s.Blocks[j] = BlockMeta{BlockStart: b.GetBlockStart(), Volume: b.GetVolume(),
					Series: b.GetSeries(), Samples: b.GetSamples(), Digest: b.GetDigest()}
			}
		}
		out.Shards[i] = s
	}
	return out
}

func (m *FetchBlockRequest) toPB() *nodepb.FetchBlockRequest {
	return &nodepb.FetchBlockRequest{Namespace: m.Namespace, Shard: m.Shard, BlockStart: m.BlockStart,
		After: m.After, MaxBytes: m.MaxBytes, AcceptHistograms: m.AcceptHistograms}
}

func fetchBlockRequestFromPB(p *nodepb.FetchBlockRequest) *FetchBlockRequest {
	return &FetchBlockRequest{Namespace: p.GetNamespace(), Shard: p.GetShard(), BlockStart: p.GetBlockStart(),
		After: p.GetAfter(), MaxBytes: p.GetMaxBytes(), AcceptHistograms: p.GetAcceptHistograms()}
}

func (m *FetchBlockResponse) toPB() *nodepb.FetchBlockResponse {
	out := &nodepb.FetchBlockResponse{More: m.More}
	if len(m.Series) > 0 {
		out.Series = make([]*nodepb.BlockSeries, len(m.Series))
		pbs := make([]nodepb.BlockSeries, len(m.Series))
		for i, s := range m.Series {
			pbs[i] = nodepb.BlockSeries{Id: s.ID, Data: s.Data, Samples: s.Samples}
			out.Series[i] = &pbs[i]
		}
	}
	return out
}

func fetchBlockResponseFromPB(p *nodepb.FetchBlockResponse) *FetchBlockResponse {
	out := &FetchBlockResponse{More: p.GetMore()}
	if len(p.GetSeries()) > 0 {
		out.Series = make([]BlockSeries, len(p.GetSeries()))
		for i, s := range p.GetSeries() {
			out.Series[i] = BlockSeries{ID: s.GetId(), Data: s.GetData(), Samples: s.GetSamples()}
		}
	}
	return out
}

func (m *FetchUnflushedRequest) toPB() *nodepb.FetchUnflushedRequest {
	return &nodepb.FetchUnflushedRequest{Namespace: m.Namespace, Shard: m.Shard, After: m.After, MaxBytes: m.MaxBytes,
		AcceptHistograms: m.AcceptHistograms}
}

func fetchUnflushedRequestFromPB(p *nodepb.FetchUnflushedRequest) *FetchUnflushedRequest {
	return &FetchUnflushedRequest{Namespace: p.GetNamespace(), Shard: p.GetShard(), After: p.GetAfter(), MaxBytes: p.GetMaxBytes(),
		AcceptHistograms: p.GetAcceptHistograms()}
}

func (m *FetchUnflushedResponse) toPB() *nodepb.FetchUnflushedResponse {
	return &nodepb.FetchUnflushedResponse{Series: fetchedSeriesToPB(m.Series), More: m.More}
}

func fetchUnflushedResponseFromPB(p *nodepb.FetchUnflushedResponse) *FetchUnflushedResponse {
	return &FetchUnflushedResponse{Series: fetchedSeriesFromPB(p.GetSeries()), More: p.GetMore()}
}

func writeResultFromPB(p *nodepb.WriteBatchResponse) WriteResult {
	return WriteResult{Written: int(p.GetWritten()), Rejected: int(p.GetRejected()), RejectMsg: p.GetRejectMsg(),
		RejectedSeriesLimit: int(p.GetRejectedSeriesLimit())}
}

func (r WriteResult) toPB() *nodepb.WriteBatchResponse {
	return &nodepb.WriteBatchResponse{Written: uint32(r.Written), Rejected: uint32(r.Rejected), RejectMsg: r.RejectMsg,
		RejectedSeriesLimit: uint32(r.RejectedSeriesLimit)}
}
