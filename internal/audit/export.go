package audit

import (
	"bufio"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// ExportFormat names the layout of an export directory.
const ExportFormat = "toolwire-audit-export/v1"

// RecordsFile and ManifestFile are the files of an export directory.
const (
	RecordsFile  = "records.jsonl"
	ManifestFile = "manifest.json"
)

// Manifest describes an export: what was selected, what it holds, and the
// SHA-256 of its records file, so that an auditor can check it later.
type Manifest struct {
	Format    string         `json:"format"`
	CreatedAt time.Time      `json:"created_at"`
	Filter    Filter         `json:"filter"`
	Records   int            `json:"records"`
	Outcomes  map[string]int `json:"outcomes"`
	Anomalies []Anomaly      `json:"anomalies"`
	// Signers are the keys that signed the exported results, with the
	// pool each was enrolled for (or a dispatcher's): what a third party
	// checks the records' signatures with (Signature.Check).
	Signers  []Signer `json:"signers"`
	FirstSeq uint64   `json:"calls_first_seq"`
	LastSeq  uint64   `json:"calls_last_seq"`
	SHA256   string   `json:"sha256"`
}

// Exporter writes records into an export directory.
type Exporter struct {
	dir  string
	f    *os.File
	w    *bufio.Writer
	h    hash.Hash
	n    int
	outc map[string]int
	sig  map[Signer]bool
}

// Signer is a key that signed exported results.
type Signer struct {
	Key        string `json:"key"`
	Pool       string `json:"pool,omitempty"`
	Dispatcher bool   `json:"dispatcher,omitempty"`
}

// NewExporter creates dir (which must not exist or be empty) and its
// records file.
func NewExporter(dir string) (*Exporter, error) {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("audit: export directory %s is not empty", dir)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("audit: export: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, RecordsFile), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return nil, fmt.Errorf("audit: export: %w", err)
	}
	h := sha256.New()
	return &Exporter{dir: dir, f: f, w: bufio.NewWriterSize(io.MultiWriter(f, h), 1<<16), h: h, outc: map[string]int{}, sig: map[Signer]bool{}}, nil
}

// Write appends one record as a JSON line.
func (e *Exporter) Write(r *Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("audit: export: %w", err)
	}
	b = append(b, '\n')
	if _, err := e.w.Write(b); err != nil {
		return fmt.Errorf("audit: export: %w", err)
	}
	e.n++
	e.outc[r.Outcome]++
	if s := r.Signature; s != nil {
		e.sig[Signer{Key: s.Signer, Pool: s.Pool, Dispatcher: s.Dispatcher}] = true
	}
	return nil
}

// Close flushes the records, syncs them and writes the manifest.
func (e *Exporter) Close(f Filter, sum *Summary) (*Manifest, error) {
	err := errors.Join(e.w.Flush(), e.f.Sync(), e.f.Close())
	if err != nil {
		return nil, fmt.Errorf("audit: export: %w", err)
	}
	m := &Manifest{Format: ExportFormat, CreatedAt: time.Now().UTC(), Filter: f, Records: e.n, Outcomes: maps.Clone(e.outc),
		Anomalies: sum.Anomalies, FirstSeq: sum.FirstSeq, LastSeq: sum.LastSeq, SHA256: hex.EncodeToString(e.h.Sum(nil))}
	if m.Anomalies == nil {
		m.Anomalies = []Anomaly{}
	}
	m.Signers = slices.SortedFunc(maps.Keys(e.sig), func(a, b Signer) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Pool, b.Pool))
	})
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("audit: export: %w", err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, ManifestFile), append(b, '\n'), 0o640); err != nil {
		return nil, fmt.Errorf("audit: export: %w", err)
	}
	return m, nil
}

// ErrExportMismatch is matched by every difference VerifyExport finds.
var ErrExportMismatch = errors.New("audit: export does not match its manifest")

// VerifyExport checks an export directory: the records file's SHA-256, its
// record count and its counts per outcome must equal the manifest's,
// every line must be a record, and every record's signature must verify
// over its statement with a signer the manifest lists. It returns the
// manifest.
func VerifyExport(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("audit: verify export: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("audit: verify export: manifest: %w", err)
	}
	if m.Format != ExportFormat {
		return nil, fmt.Errorf("%w: format %q, want %q", ErrExportMismatch, m.Format, ExportFormat)
	}
	f, err := os.Open(filepath.Join(dir, RecordsFile))
	if err != nil {
		return nil, fmt.Errorf("audit: verify export: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	sc := bufio.NewScanner(io.TeeReader(f, h))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	n := 0
	outc := map[string]int{}
	var problems []error
	for sc.Scan() {
		n++
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.Outcome == "" {
			problems = append(problems, fmt.Errorf("line %d is not a record", n))
			continue
		}
		outc[r.Outcome]++
		if s := r.Signature; s != nil {
			if err := s.Check(); err != nil || s.CallID != r.CallID || !slices.Contains(m.Signers, Signer{Key: s.Signer, Pool: s.Pool, Dispatcher: s.Dispatcher}) {
				problems = append(problems, fmt.Errorf("line %d: the response's signature does not verify, or its signer is not the manifest's", n))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("audit: verify export: %w", err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != m.SHA256 {
		problems = append(problems, fmt.Errorf("records SHA-256 %s, manifest says %s", sum, m.SHA256))
	}
	if n != m.Records {
		problems = append(problems, fmt.Errorf("%d records, manifest says %d", n, m.Records))
	}
	if !maps.Equal(outc, m.Outcomes) {
		problems = append(problems, fmt.Errorf("outcomes %v, manifest says %v", outc, m.Outcomes))
	}
	if len(problems) > 0 {
		return &m, fmt.Errorf("%w: %w", ErrExportMismatch, errors.Join(problems...))
	}
	return &m, nil
}
