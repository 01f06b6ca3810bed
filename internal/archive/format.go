package archive

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolwire/toolwire/internal/signing"
)

// SegmentFormat names the layout of a segment's records and manifest.
const SegmentFormat = "toolwire-archive-segment/v1"

// KindSegment is the kind of the signed statement over a segment's
// manifest (signing.Statement's first line), so that a manifest's
// signature can never pass for a result's or an event's.
const KindSegment = "archive-segment"

// Message is one stored stream message as the archive keeps it: the
// subject, the stream sequence, the time the stream stored it, its
// headers (signatures, message ids, trace context) and its payload bytes
// exactly as stored (base64 in JSON), so that what was signed still
// verifies and a replay re-executes the call as it was.
type Message struct {
	Stream  string      `json:"stream"`
	Subject string      `json:"subject"`
	Seq     uint64      `json:"seq"`
	Time    time.Time   `json:"time"`
	Header  nats.Header `json:"header,omitempty"`
	Data    []byte      `json:"data"`
}

// Manifest describes one sealed segment of a stream: which stream
// sequences it covers, what it holds, the SHA-256 of its records object
// and the SHA-256 of the previous segment's manifest object (Prev), which
// chains a stream's segments so that a dropped, reordered or changed one
// is found (Verify).
type Manifest struct {
	Format string `json:"format"`
	Stream string `json:"stream"`
	// Index is the segment's place in its stream's chain, from 0.
	Index uint64 `json:"index"`
	// FromSeq and ToSeq are the stream sequences the segment covers: the
	// chain's ranges are contiguous (FromSeq is the previous ToSeq + 1).
	FromSeq uint64 `json:"from_seq"`
	ToSeq   uint64 `json:"to_seq"`
	// FirstSeq and LastSeq are the sequences of the first and last
	// messages held; 0 when it holds none.
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	// FirstTime and LastTime are when the stream stored them.
	FirstTime time.Time `json:"first_time"`
	LastTime  time.Time `json:"last_time"`
	// PeriodStart and PeriodEnd are the closed period the segment belongs
	// to (every message's time is in [PeriodStart, PeriodEnd)).
	PeriodStart time.Time `json:"period_start"`
	PeriodEnd   time.Time `json:"period_end"`
	Messages    int       `json:"messages"`
	// Missing counts the sequences of [FromSeq, ToSeq] the stream no
	// longer held when the segment was written: messages deleted from the
	// stream, and (an error the archiver logs) any dropped before they
	// were archived. DroppedBeforeArchive counts the latter alone.
	Missing              uint64 `json:"missing"`
	DroppedBeforeArchive uint64 `json:"dropped_before_archive,omitempty"`
	// Records is the key of the records object, Bytes its size and
	// SHA256 the SHA-256 of its bytes as stored (gzip).
	Records string `json:"records"`
	Bytes   int64  `json:"bytes"`
	SHA256  string `json:"sha256"`
	// Prev is the SHA-256 of the previous segment's manifest object; ""
	// for the first segment.
	Prev      string    `json:"prev"`
	CreatedAt time.Time `json:"created_at"`
	// Archiver is the dispatcher replica that wrote it.
	Archiver string `json:"archiver"`
}

// SignedManifest is a manifest object: the manifest's bytes and the
// signature of the dispatcher that wrote it over
// signing.Statement(KindSegment, "<stream>/<index>", 0, manifest bytes).
type SignedManifest struct {
	Manifest  json.RawMessage `json:"manifest"`
	Signer    string          `json:"signer"`
	Signature string          `json:"signature"`
	// Batch is the statement's place in the batch the signature covers
	// (signing.HeaderBatch); empty when it covers the statement alone.
	Batch string `json:"batch,omitempty"`
}

// Head is a stream's chain head: the last sealed segment, written after
// its manifest, so that a dropped last segment is found too.
type Head struct {
	Stream string `json:"stream"`
	Index  uint64 `json:"index"`
	ToSeq  uint64 `json:"to_seq"`
	// Manifest is the SHA-256 of the last segment's manifest object.
	Manifest string    `json:"manifest"`
	LastTime time.Time `json:"last_time"`
}

// The object keys of a stream's segments.
func manifestKey(stream string, index uint64) string {
	return fmt.Sprintf("%s/%016d.manifest.json", stream, index)
}

func recordsKey(stream string, index uint64, nonce string) string {
	return fmt.Sprintf("%s/%016d-%s.jsonl.gz", stream, index, nonce)
}

func headKey(stream string) string { return stream + "/head.json" }

// indexOfManifestKey is the index a manifest key names; ok false for any
// other key.
func indexOfManifestKey(stream, key string) (uint64, bool) {
	name, ok := strings.CutPrefix(key, stream+"/")
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(name, ".manifest.json")
	if !ok || len(digits) != 16 {
		return 0, false
	}
	i, err := strconv.ParseUint(digits, 10, 64)
	return i, err == nil
}

func statementName(stream string, index uint64) string {
	return stream + "/" + strconv.FormatUint(index, 10)
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// sign encodes m and signs it with key.
func sign(key *signing.Key, m *Manifest) ([]byte, error) {
	mb, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("archive: manifest: %w", err)
	}
	h := key.Sign(nil, KindSegment, statementName(m.Stream, m.Index), 0, mb)
	sm := SignedManifest{Manifest: mb, Signer: h.Get(signing.HeaderSigner), Signature: h.Get(signing.HeaderSignature), Batch: h.Get(signing.HeaderBatch)}
	// Compact: the manifest's bytes must stay exactly those signed
	// (an indenting encoder would re-indent them).
	b, err := json.Marshal(&sm)
	if err != nil {
		return nil, fmt.Errorf("archive: manifest: %w", err)
	}
	return append(b, '\n'), nil
}

// errUnsigned is a manifest object whose signature does not verify.
var errUnsigned = errors.New("signature does not verify")

// decodeManifest reads a manifest object and checks its signature (not
// whose it is: Verify's Trusted says). It returns the manifest and the
// signer.
func decodeManifest(b []byte) (*Manifest, string, error) {
	var sm SignedManifest
	if err := json.Unmarshal(b, &sm); err != nil {
		return nil, "", fmt.Errorf("not a manifest object: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(sm.Manifest, &m); err != nil {
		return nil, sm.Signer, fmt.Errorf("not a manifest: %w", err)
	}
	if m.Format != SegmentFormat {
		return &m, sm.Signer, fmt.Errorf("format %q, want %q", m.Format, SegmentFormat)
	}
	h := nats.Header{signing.HeaderSigner: {sm.Signer}, signing.HeaderSignature: {sm.Signature}}
	if sm.Batch != "" {
		h[signing.HeaderBatch] = []string{sm.Batch}
	}
	if _, p := signing.VerifySignature(h, KindSegment, statementName(m.Stream, m.Index), 0, sm.Manifest); p != "" {
		return &m, sm.Signer, fmt.Errorf("%w (%s)", errUnsigned, p)
	}
	return &m, sm.Signer, nil
}
