package archive

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"gocloud.dev/blob"
)

// Problem is one thing Verify found wrong with a chain.
type Problem struct {
	// Index is the segment it concerns.
	Index uint64 `json:"index"`
	// Kind is "gap" (a segment missing from the chain: dropped), "changed"
	// (a records object or a manifest that does not match what the chain
	// says: its hash, size, count or link), "sequence" (a segment's range
	// does not follow the previous one's), "signature" (a manifest whose
	// signature does not verify, or whose signer Trusted refuses),
	// "unreadable", "head" (the head names a segment the chain does not
	// reach: the last segments were dropped) or "dropped" (messages the
	// stream dropped before they were archived).
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

// Report is what Verify found for one stream.
type Report struct {
	Stream   string `json:"stream"`
	Segments int    `json:"segments"`
	Messages int    `json:"messages"`
	// FromSeq and ToSeq are the sequences the chain covers (0, 0 when it
	// is empty).
	FromSeq uint64 `json:"from_seq"`
	ToSeq   uint64 `json:"to_seq"`
	// Missing counts covered sequences the stream no longer held when
	// archived (deleted messages; Problems name the dropped ones).
	Missing  uint64    `json:"missing"`
	Signers  []string  `json:"signers"`
	Problems []Problem `json:"problems"`
}

// OK reports a chain without problems.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

func (r *Report) add(index uint64, kind, format string, args ...any) {
	r.Problems = append(r.Problems, Problem{Index: index, Kind: kind, Detail: fmt.Sprintf(format, args...)})
}

// VerifyOptions tunes Verify.
type VerifyOptions struct {
	// Trusted, if set, must accept every manifest's signer (a
	// dispatcher's key: the registry's enrolments, or a list an auditor
	// holds); nil = any signature that verifies, its signer listed in
	// Report.Signers.
	Trusted func(signer string) bool
}

// Verify walks stream's chain in b from its first segment: each manifest
// must verify (signature, format), link to the one before (Prev is the
// SHA-256 of the previous manifest object), cover the sequences right
// after it, and describe its records object exactly (SHA-256, size,
// message count, sequences and times within the manifest's) and name
// stream as its own; the chain must reach the head, which must name
// stream and a segment of the chain as it is (its manifest's SHA-256 and
// ToSeq). It reads every records object. The error is for a
// store that could not be read; what is wrong with the chain is in the
// Report.
func Verify(ctx context.Context, b *blob.Bucket, stream string, o VerifyOptions) (*Report, error) {
	// The head is read before the chain is listed: a writer puts a
	// segment's manifest before the head that names it, so a head read
	// first names a segment the listing holds, though the archiver runs
	// meanwhile. A head absent then, over a chain that is not, may have
	// been written since (the first head): it is read again and the
	// chain walked again after it, so the head and the listing still
	// come in that order (found in CI: a head read after the listing
	// named a segment sealed meanwhile).
	hb, herr := b.ReadAll(ctx, headKey(stream))
	rep, next, seen, err := verifyChain(ctx, b, stream, o)
	if err != nil {
		return nil, err
	}
	if notFound(herr) && next > 0 {
		hb, herr = b.ReadAll(ctx, headKey(stream))
		if !notFound(herr) {
			if rep, next, seen, err = verifyChain(ctx, b, stream, o); err != nil {
				return nil, err
			}
		}
	}
	verifyHead(rep, hb, herr, next, seen)
	return rep, nil
}

// verifyChain lists stream's segments and checks each (see Verify); next
// is one past the last segment found, seen each segment's manifest sum
// and ToSeq, for the head.
func verifyChain(ctx context.Context, b *blob.Bucket, stream string, o VerifyOptions) (*Report, uint64, map[uint64]headOf, error) {
	rep := &Report{Stream: stream, Signers: []string{}, Problems: []Problem{}}
	keys, err := manifestKeys(ctx, b, stream)
	if err != nil {
		return nil, 0, nil, err
	}
	var prev *Manifest
	var prevSum string
	next := uint64(0)
	seen := map[uint64]headOf{}
	for _, k := range keys {
		if k.index != next {
			rep.add(next, "gap", "segments %d to %d are missing", next, k.index-1)
		}
		object, err := b.ReadAll(ctx, k.key)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("archive: verify %s: %w", k.key, err)
		}
		m := verifyManifest(rep, k.index, object, o)
		if m != nil {
			verifyLink(rep, prev, prevSum, m, k.index == next)
			if err := verifyRecords(ctx, b, rep, m); err != nil {
				return nil, 0, nil, err
			}
			rep.Segments++
			rep.Messages += m.Messages
			rep.Missing += m.Missing
			if rep.FromSeq == 0 {
				rep.FromSeq = m.FromSeq
			}
			rep.ToSeq = m.ToSeq
		}
		prev, prevSum, next = m, sum(object), k.index+1
		if m != nil {
			seen[k.index] = headOf{manifest: prevSum, toSeq: m.ToSeq}
		}
	}
	return rep, next, seen, nil
}

// verifyManifest decodes and checks one manifest object; nil when it
// cannot be read at all.
func verifyManifest(rep *Report, index uint64, object []byte, o VerifyOptions) *Manifest {
	m, signer, err := decodeManifest(object)
	switch {
	case m == nil:
		rep.add(index, "unreadable", "manifest: %v", err)
		return nil
	case err != nil:
		rep.add(index, "signature", "manifest: %v", err)
	case o.Trusted != nil && !o.Trusted(signer):
		rep.add(index, "signature", "signed by %s, which is not trusted", signer)
	}
	if signer != "" && !slices.Contains(rep.Signers, signer) {
		rep.Signers = append(rep.Signers, signer)
	}
	if m.Index != index {
		rep.add(index, "changed", "manifest says index %d", m.Index)
	}
	if m.Stream != rep.Stream {
		rep.add(index, "changed", "manifest of stream %q in the chain of %q", m.Stream, rep.Stream)
	}
	return m
}

// verifyLink checks m against the segment before it (prev, whose object
// hashes to prevSum; nil for the first or after an unreadable one).
// adjacent is false after a gap, whose problem is reported already.
func verifyLink(rep *Report, prev *Manifest, prevSum string, m *Manifest, adjacent bool) {
	if m.DroppedBeforeArchive > 0 {
		rep.add(m.Index, "dropped", "%d messages before %d were dropped by the stream before they were archived", m.DroppedBeforeArchive, m.FromSeq)
	}
	if !adjacent {
		return
	}
	if m.Index == 0 {
		if m.Prev != "" {
			rep.add(0, "changed", "the first segment links to a previous one")
		}
		return
	}
	if prev == nil {
		return
	}
	if m.Prev != prevSum {
		rep.add(m.Index, "changed", "links to manifest %.12s…, the previous one hashes to %.12s…", m.Prev, prevSum)
	}
	if m.FromSeq != prev.ToSeq+1 {
		rep.add(m.Index, "sequence", "covers from %d, the previous segment up to %d", m.FromSeq, prev.ToSeq)
	}
}

// verifyRecords reads m's records object and checks it against m.
func verifyRecords(ctx context.Context, b *blob.Bucket, rep *Report, m *Manifest) error {
	n, first, last := 0, uint64(0), uint64(0)
	var bad error
	h, size, err := readRecords(ctx, b, m.Records, func(msg *Message) error {
		n++
		if first == 0 {
			first = msg.Seq
		}
		if msg.Seq <= last || msg.Seq < m.FromSeq || msg.Seq > m.ToSeq || msg.Stream != m.Stream ||
			msg.Time.Before(m.PeriodStart) || !msg.Time.Before(m.PeriodEnd) {
			bad = fmt.Errorf("message %d is out of the segment's order, range or period", msg.Seq)
		}
		last = msg.Seq
		return nil
	})
	switch {
	case notFound(err):
		rep.add(m.Index, "changed", "records object %s is missing", m.Records)
		return nil
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("archive: verify: %w", err)
	case err != nil:
		rep.add(m.Index, "changed", "records: %v", err)
		return nil
	}
	if h != m.SHA256 || size != m.Bytes {
		rep.add(m.Index, "changed", "records object hashes to %.12s… (%d bytes), the manifest says %.12s… (%d bytes)", h, size, m.SHA256, m.Bytes)
	}
	if n != m.Messages || first != m.FirstSeq || last != m.LastSeq {
		rep.add(m.Index, "changed", "records hold %d messages %d..%d, the manifest says %d, %d..%d", n, first, last, m.Messages, m.FirstSeq, m.LastSeq)
	}
	if bad != nil {
		rep.add(m.Index, "changed", "%v", bad)
	}
	return nil
}

// headOf is what a head must say of the segment it names.
type headOf struct {
	manifest string
	toSeq    uint64
}

// verifyHead checks that the chain reaches the head (hb, read before the
// chain was listed, or the error reading it; next is one past
// the last segment found) and that the head names its stream and a
// segment of the chain as it is (seen: each segment's manifest sum and
// ToSeq). A head behind the chain's end is sound: a writer stopped
// between a manifest and the head.
func verifyHead(rep *Report, hb []byte, err error, next uint64, seen map[uint64]headOf) {
	if notFound(err) {
		if next > 0 {
			rep.add(next-1, "head", "the chain has no head")
		}
		return
	}
	var h Head
	if err == nil {
		err = json.Unmarshal(hb, &h)
	}
	if err != nil {
		rep.add(next, "head", "unreadable head: %v", err)
		return
	}
	if next == 0 || h.Index >= next {
		rep.add(h.Index, "head", "the head names segment %d (up to sequence %d), the chain ends before it", h.Index, h.ToSeq)
		return
	}
	if h.Stream != rep.Stream {
		rep.add(h.Index, "head", "the head is of stream %q", h.Stream)
	}
	if s, ok := seen[h.Index]; ok && (s.manifest != h.Manifest || s.toSeq != h.ToSeq) {
		rep.add(h.Index, "head", "the head says segment %d is %.12s… up to sequence %d, the chain has %.12s… up to %d",
			h.Index, h.Manifest, h.ToSeq, s.manifest, s.toSeq)
	}
}
