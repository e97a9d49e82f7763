package encoding

import (
	"encoding/binary"
	"math"
)

// Timestamp section kinds of the sealed form.
const (
	tsCodes = 0 // 64-bit first timestamp, then the stream's timestamp codes
	tsRuns  = 1 // runs of on-schedule timestamps, Rice coded, and the offsets between them
)

// maxRunSamples is the most samples a block with a tsRuns section may hold.
// Every other form spends at least a bit per sample, which bounds a
// decoder's work by its input; a run can stand for any number of samples,
// so this bounds it instead (2^24 is over 2 hours at one sample per ms).
const maxRunSamples = 1 << 24

// appendTimestamps appends the sealed timestamp section of s.ts, length
// prefixed, in whichever kind is smaller. Scraped series are on schedule
// nine times in ten: coding the runs between late scrapes takes well under
// a bit per sample where one code per sample takes at least one.
func (s *Sealer) appendTimestamps(out []byte) []byte {
	// Kind codes.
	s.w.reset(0)
	s.w.writeBits(uint64(s.ts[0]), 64)
	tc := newTSCoder(s.ts[0])
	for _, t := range s.ts[1:] {
		tc.encode(&s.w, t)
	}
	codes := s.w.bytes()

	// Kind runs: the offsets from the schedule, split into the zero runs
	// before each non-zero offset and the non-zero offsets.
	runs, offs := s.zs[:0], s.z2[:0]
	tc = newTSCoder(s.ts[0])
	var run uint64
	for _, t := range s.ts[1:] {
		off := tc.offset(t)
		if off == 0 {
			run++
			continue
		}
		runs = append(runs, run)
		offs = append(offs, zigzag(int64(off))-1)
		run = 0
	}
	s.zs, s.z2 = runs, offs
	kr, runBits := bestRiceK(runs)
	ko, offBits := bestRiceK(offs)
	runsLen := 1 + 8 + binary.MaxVarintLen64 + 2 + int((runBits+offBits+7)/8)

	if len(codes)+1 <= runsLen || len(s.ts) > maxRunSamples {
		out = binary.AppendUvarint(out, uint64(1+len(codes)))
		out = append(out, tsCodes)
		return append(out, codes...)
	}
	var hdr [1 + 8 + binary.MaxVarintLen64 + 2]byte
	h := append(hdr[:0], tsRuns)
	h = binary.LittleEndian.AppendUint64(h, uint64(s.ts[0]))
	h = binary.AppendUvarint(h, uint64(len(runs)))
	h = append(h, byte(kr), byte(ko))
	s.w.reset(0)
	for i := range runs {
		writeRice(&s.w, runs[i], kr)
		writeRice(&s.w, offs[i], ko)
	}
	out = binary.AppendUvarint(out, uint64(len(h)+len(s.w.bytes())))
	out = append(out, h...)
	return append(out, s.w.bytes()...)
}

// runDecoder reads the offsets of a tsRuns section.
type runDecoder struct {
	left    uint64 // zero offsets before the next non-zero one
	pending bool   // a non-zero offset follows the run
	read    uint64 // runs read
	runs    uint64 // runs in the section
	kr, ko  uint
}

// load reads the next run, if any; after the last the offsets are zero
// until the end.
func (d *runDecoder) load(r *bitReader) {
	if d.read == d.runs {
		d.left, d.pending = math.MaxUint64, false
		return
	}
	d.left, d.pending = readRice(r, d.kr), true
	d.read++
}

// next returns the next offset.
func (d *runDecoder) next(r *bitReader) uint64 {
	if d.left > 0 {
		d.left--
		return 0
	}
	off := uint64(unzigzag(readRice(r, d.ko) + 1))
	d.load(r)
	return off
}

// done reports whether every run was used up.
func (d *runDecoder) done() bool { return !d.pending }
