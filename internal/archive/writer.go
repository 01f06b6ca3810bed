package archive

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"time"

	"gocloud.dev/blob"

	"github.com/toolwire/toolwire/internal/signing"
)

// Writer appends sealed segments to one stream's chain in a store. It is
// not safe for concurrent use; two Writers of one stream (two archivers
// that both believe they lead) cannot both seal a segment: a manifest is
// written only if its key does not exist yet (ErrRaced).
type Writer struct {
	b        *blob.Bucket
	stream   string
	key      *signing.Key
	archiver string
	head     Head
	sealed   bool // head names a sealed segment (false for an empty chain)
}

// ErrRaced is Seal's error when another writer sealed the segment of the
// same index first: this writer's view of the chain is stale.
var ErrRaced = errors.New("archive: another archiver sealed this segment first")

// OpenWriter opens stream's chain in b for appending, signing manifests
// with key and naming archiver as their writer. It reads the chain's head
// and follows the manifests past it (a head not yet written after a
// manifest, when an archiver stopped between the two).
func OpenWriter(ctx context.Context, b *blob.Bucket, stream string, key *signing.Key, archiver string) (*Writer, error) {
	if key == nil {
		return nil, errors.New("archive: a writer needs a signing key")
	}
	w := &Writer{b: b, stream: stream, key: key, archiver: archiver, head: Head{Stream: stream}}
	hb, err := b.ReadAll(ctx, headKey(stream))
	switch {
	case notFound(err):
	case err != nil:
		return nil, readErr("head of "+stream, err)
	default:
		if err := json.Unmarshal(hb, &w.head); err != nil {
			return nil, fmt.Errorf("archive: head of %s: %w", stream, err)
		}
		w.sealed = true
	}
	for {
		next := w.nextIndex()
		mb, err := b.ReadAll(ctx, manifestKey(stream, next))
		if notFound(err) {
			return w, nil
		}
		if err != nil {
			return nil, readErr(fmt.Sprintf("manifest %d of %s", next, stream), err)
		}
		m, _, err := decodeManifest(mb)
		if err != nil {
			return nil, fmt.Errorf("archive: manifest %d of %s: %w", next, stream, err)
		}
		w.advance(m, mb)
	}
}

// Head is the chain's head: the last sealed segment (Index and ToSeq 0,
// Manifest "" while there is none).
func (w *Writer) Head() Head { return w.head }

func (w *Writer) nextIndex() uint64 {
	if !w.sealed {
		return 0
	}
	return w.head.Index + 1
}

func (w *Writer) advance(m *Manifest, object []byte) {
	w.head = Head{Stream: w.stream, Index: m.Index, ToSeq: m.ToSeq, Manifest: sum(object), LastTime: m.LastTime}
	w.sealed = true
}

// Segment is a segment being written: its records stream into the store
// as they are added, gzip-compressed, one Message a JSON line.
type Segment struct {
	w      *uploadWriter
	cancel context.CancelFunc
	gz     *gzip.Writer
	enc    *json.Encoder
	h      hash.Hash
	n      *counter
	m      Manifest
	done   bool
}

type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// Begin starts the next segment, for the period [start, end).
func (w *Writer) Begin(ctx context.Context, start, end time.Time) (*Segment, error) {
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	idx := w.nextIndex()
	key := recordsKey(w.stream, idx, hex.EncodeToString(nonce[:]))
	wctx, cancel := context.WithCancel(ctx)
	bw := newUploadWriter(wctx, w.b, key, writerOptions("application/gzip", false))
	s := &Segment{w: bw, cancel: cancel, h: sha256.New(), n: &counter{}}
	s.gz, _ = gzip.NewWriterLevel(io.MultiWriter(bw, s.h, s.n), gzip.BestSpeed)
	s.enc = json.NewEncoder(s.gz)
	s.m = Manifest{Format: SegmentFormat, Stream: w.stream, Index: idx, FromSeq: w.head.ToSeq + 1, Records: key,
		PeriodStart: start.UTC(), PeriodEnd: end.UTC(), Prev: w.head.Manifest, Archiver: w.archiver}
	return s, nil
}

// Add appends m, which must come after every message added before.
func (s *Segment) Add(m *Message) error {
	if m.Seq < s.m.FromSeq || (s.m.LastSeq != 0 && m.Seq <= s.m.LastSeq) {
		return fmt.Errorf("archive: message %d out of order in segment from %d (last %d)", m.Seq, s.m.FromSeq, s.m.LastSeq)
	}
	if err := s.enc.Encode(m); err != nil {
		return fmt.Errorf("archive: segment %d: %w", s.m.Index, err)
	}
	if s.m.Messages == 0 {
		s.m.FirstSeq, s.m.FirstTime = m.Seq, m.Time.UTC()
	}
	s.m.LastSeq, s.m.LastTime = m.Seq, m.Time.UTC()
	s.m.Messages++
	return nil
}

// Len is how many messages were added.
func (s *Segment) Len() int { return s.m.Messages }

// Bytes is about how many compressed bytes were written so far.
func (s *Segment) Bytes() int64 { return s.n.n }

// Abort drops the segment: its records object is not written (or, where
// the store already holds a part, never referenced). Idempotent.
func (s *Segment) Abort() {
	if !s.done {
		s.done = true
		s.cancel()
		s.w.Abort()
	}
}

// Seal closes s as covering the stream sequences up to toSeq, with
// dropped of them known to have been dropped before they were archived,
// writes its signed manifest (only if no other writer sealed that index:
// ErrRaced) and then the chain's head. After an error the segment is
// aborted and the chain unchanged (a records object may be left,
// referenced by no manifest).
func (w *Writer) Seal(ctx context.Context, s *Segment, toSeq, dropped uint64) (*Manifest, error) {
	if s.done {
		return nil, errors.New("archive: segment already sealed or aborted")
	}
	if toSeq < s.m.FromSeq || toSeq < s.m.LastSeq {
		s.Abort()
		return nil, fmt.Errorf("archive: segment %d: ToSeq %d before its messages", s.m.Index, toSeq)
	}
	if err := errors.Join(s.gz.Close(), s.w.Close()); err != nil {
		s.done = true
		s.cancel()
		return nil, fmt.Errorf("archive: segment %d of %s: %w", s.m.Index, w.stream, err)
	}
	s.done = true
	s.cancel()
	m := s.m
	m.ToSeq, m.DroppedBeforeArchive = toSeq, dropped
	m.Missing = (toSeq - m.FromSeq + 1) - uint64(m.Messages)
	m.Bytes, m.SHA256, m.CreatedAt = s.n.n, hex.EncodeToString(s.h.Sum(nil)), time.Now().UTC()
	object, err := sign(w.key, &m)
	if err != nil {
		return nil, err
	}
	err = w.b.Upload(ctx, manifestKey(w.stream, m.Index), bytes.NewReader(object), writerOptions("application/json", true))
	if exists(err) {
		return nil, fmt.Errorf("%w (%s segment %d)", ErrRaced, w.stream, m.Index)
	}
	if err != nil {
		return nil, fmt.Errorf("archive: manifest %d of %s: %w", m.Index, w.stream, err)
	}
	w.advance(&m, object)
	hb, _ := json.Marshal(w.head)
	if err := w.b.Upload(ctx, headKey(w.stream), bytes.NewReader(hb), writerOptions("application/json", false)); err != nil {
		// The manifest is sealed: the next OpenWriter follows it.
		return &m, fmt.Errorf("archive: head of %s: %w", w.stream, err)
	}
	return &m, nil
}

// writerOptions are the options of every object written: in a directory
// store (fileblob, which would make it 0666 less the umask) the file is
// made 0600 before anything is written to it.
func writerOptions(contentType string, ifNotExist bool) *blob.WriterOptions {
	return &blob.WriterOptions{ContentType: contentType, IfNotExist: ifNotExist, BeforeWrite: func(as func(any) bool) error {
		var f *os.File
		if as(&f) {
			return f.Chmod(0o600)
		}
		return nil
	}}
}

// readRecords reads a records object's messages, calling fn for each,
// and returns the object's SHA-256 and size.
func readRecords(ctx context.Context, b *blob.Bucket, key string, fn func(*Message) error) (string, int64, error) {
	r, err := b.NewReader(ctx, key, nil)
	if err != nil {
		return "", 0, err
	}
	defer r.Close()
	h, n := sha256.New(), &counter{}
	tee := io.TeeReader(r, io.MultiWriter(h, n))
	gz, err := gzip.NewReader(tee)
	if err != nil {
		return "", 0, fmt.Errorf("records %s: %w", key, err)
	}
	dec := json.NewDecoder(gz)
	for {
		var m Message
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", 0, fmt.Errorf("records %s: %w", key, err)
		}
		if fn != nil {
			if err := fn(&m); err != nil {
				return "", 0, err
			}
		}
	}
	// Read what follows the gzip stream (nothing, in a sound object) so
	// the hash covers every byte.
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return "", 0, fmt.Errorf("records %s: %w", key, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n.n, nil
}
