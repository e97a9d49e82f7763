package rpc

import "github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"

func (m *BlockDigestsRequest) toPB() *nodepb.BlockDigestsRequest {
	return &nodepb.BlockDigestsRequest{Namespace: m.Namespace, Shard: m.Shard, Start: m.Start, End: m.End}
}

func blockDigestsRequestFromPB(p *nodepb.BlockDigestsRequest) *BlockDigestsRequest {
	return &BlockDigestsRequest{Namespace: p.GetNamespace(), Shard: p.GetShard(), Start: p.GetStart(), End: p.GetEnd()}
}

func (m *BlockDigestsResponse) toPB() *nodepb.BlockDigestsResponse {
	out := &nodepb.BlockDigestsResponse{}
	if len(m.Blocks) > 0 {
		out.Blocks = make([]*nodepb.BlockDigest, len(m.Blocks))
		pbs := make([]nodepb.BlockDigest, len(m.Blocks))
		for i, b := range m.Blocks {
			pbs[i] = nodepb.BlockDigest{BlockStart: b.BlockStart, Series: b.Series, Samples: b.Samples, Digest: b.Digest}
			out.Blocks[i] = &pbs[i]
		}
	}
	return out
}

func blockDigestsResponseFromPB(p *nodepb.BlockDigestsResponse) *BlockDigestsResponse {
	out := &BlockDigestsResponse{}
	if len(p.GetBlocks()) > 0 {
		out.Blocks = make([]BlockDigest, len(p.GetBlocks()))
		for i, b := range p.GetBlocks() {
			out.Blocks[i] = BlockDigest{BlockStart: b.GetBlockStart(), Series: b.GetSeries(), Samples: b.GetSamples(), Digest: b.GetDigest()}
		}
	}
	return out
}

func (m *SeriesChecksumsRequest) toPB() *nodepb.SeriesChecksumsRequest {
	return &nodepb.SeriesChecksumsRequest{Namespace: m.Namespace, Shard: m.Shard, BlockStart: m.BlockStart,
		Start: m.Start, End: m.End, After: m.After, MaxSeries: m.MaxSeries}
}

func seriesChecksumsRequestFromPB(p *nodepb.SeriesChecksumsRequest) *SeriesChecksumsRequest {
	return &SeriesChecksumsRequest{Namespace: p.GetNamespace(), Shard: p.GetShard(), BlockStart: p.GetBlockStart(),
		Start: p.GetStart(), End: p.GetEnd(), After: p.GetAfter(), MaxSeries: p.GetMaxSeries()}
}

func (m *SeriesChecksumsResponse) toPB() *nodepb.SeriesChecksumsResponse {
	out := &nodepb.SeriesChecksumsResponse{More: m.More}
	if len(m.Series) > 0 {
		out.Series = make([]*nodepb.SeriesChecksum, len(m.Series))
		pbs := make([]nodepb.SeriesChecksum, len(m.Series))
		for i, s := range m.Series {
			pbs[i] = nodepb.SeriesChecksum{Id: s.ID, Checksum: s.Checksum, Samples: s.Samples}
			out.Series[i] = &pbs[i]
		}
	}
	return out
}

func seriesChecksumsResponseFromPB(p *nodepb.SeriesChecksumsResponse) *SeriesChecksumsResponse {
	out := &SeriesChecksumsResponse{More: p.GetMore()}
	if len(p.GetSeries()) > 0 {
		out.Series = make([]SeriesChecksum, len(p.GetSeries()))
		for i, s := range p.GetSeries() {
			out.Series[i] = SeriesChecksum{ID: s.GetId(), Checksum: s.GetChecksum(), Samples: s.GetSamples()}
		}
	}
	return out
}
