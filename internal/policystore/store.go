package policystore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/policy"
)

// Errors of the Store.
var (
	// ErrNoPolicy: no document is in force for the scope.
	ErrNoPolicy = errors.New("policystore: no policy in force")
	// ErrUnknownVersion: the scope has no document of that version.
	ErrUnknownVersion = errors.New("policystore: unknown policy version")
	// ErrBadScope: a scope that names neither the installation nor a
	// valid tenant.
	ErrBadScope = errors.New("policystore: bad scope")
	// ErrBadComment: a comment over MaxCommentBytes or not UTF-8.
	ErrBadComment = errors.New("policystore: bad comment")
	// ErrQuota: the scope holds ScopeQuotaBytes of documents (or
	// ScopeMaxDocuments), none old enough to prune; or the bucket is full.
	// Nothing was stored.
	ErrQuota = errors.New("policystore: policy storage quota exceeded")
)

// MaxCommentBytes bounds the comment of an apply.
const MaxCommentBytes = 1024

// HistoryDepth is how many applies of a scope History can list: the
// bucket's history per key (bus: Policies, History 64).
const HistoryDepth = 64

// Bounds of one scope's documents in the shared bucket (doc.go, "Storage
// and quotas").
const (
	// ScopeQuotaBytes bounds the documents one scope holds, the one being
	// applied included.
	ScopeQuotaBytes = 4 << 20
	// ScopeMaxDocuments bounds how many documents one scope holds.
	ScopeMaxDocuments = 64
	// KeepDocuments is how many of a scope's latest versions keep their
	// documents (within ScopeQuotaBytes/2): older history entries are
	// still listed, but their documents are pruned.
	KeepDocuments = 16
)

// Key layout of the policies bucket. A tenant name matches
// bus.TenantPattern (letters, digits, _ and -), so it never holds a dot:
// "install" and "tenant.<t>" can never be the same token, whatever the
// tenant is called (even "_all" or "install").
const (
	currentPrefix = "current."
	docPrefix     = "doc."
	installToken  = "install"
	tenantToken   = "tenant."
)

// Scope is whose document it is: the installation's (Installation), in
// force for every tenant without one of its own, or one tenant's
// (TenantScope). The zero Scope is invalid.
type Scope struct {
	tenant  string
	install bool
}

// Installation is the scope of the installation document (the dispatcher
// flag --policy).
var Installation = Scope{install: true}

// TenantScope returns the scope of tenant's own document.
func TenantScope(tenant string) (Scope, error) {
	if !bus.ValidTenant(tenant) {
		return Scope{}, fmt.Errorf("%w: tenant %q does not match %s", ErrBadScope, tenant, bus.TenantPattern)
	}
	return Scope{tenant: tenant}, nil
}

// IsInstallation reports whether s is the installation scope.
func (s Scope) IsInstallation() bool { return s.install }

// Tenant returns the tenant of s, "*" for the installation (the form the
// API's PolicyVersion.tenant uses).
func (s Scope) Tenant() string {
	if s.install {
		return "*"
	}
	return s.tenant
}

// String renders the scope for logs: "installation" or "tenant acme".
func (s Scope) String() string {
	if s.install {
		return "installation"
	}
	return "tenant " + s.tenant
}

func (s Scope) valid() bool { return s.install || bus.ValidTenant(s.tenant) }

// token is the scope's part of a key.
func (s Scope) token() string {
	if s.install {
		return installToken
	}
	return tenantToken + s.tenant
}

// scopeOfToken is the inverse of token.
func scopeOfToken(tok string) (Scope, bool) {
	if tok == installToken {
		return Installation, true
	}
	t, ok := strings.CutPrefix(tok, tenantToken)
	if !ok || !bus.ValidTenant(t) {
		return Scope{}, false
	}
	return Scope{tenant: t}, true
}

func currentKey(s Scope) string { return currentPrefix + s.token() }

// versionRe is the form of a policy version.
var versionRe = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ValidVersion reports whether v has the form of a policy version,
// "sha256:" and 64 lower-case hex digits.
func ValidVersion(v string) bool { return versionRe.MatchString(v) }

func docKey(s Scope, version string) string {
	return docPrefix + s.token() + "." + strings.TrimPrefix(version, "sha256:")
}

// record is the value of a scope's in-force key: which document, and who
// applied it when and why. Its history is the scope's history.
type record struct {
	Version   string    `json:"version"`
	AppliedAt time.Time `json:"applied_at"`
	AppliedBy string    `json:"applied_by,omitempty"`
	Comment   string    `json:"comment,omitempty"`
	Rules     int       `json:"rules"`
	Tests     int       `json:"tests"`
}

// Version describes one applied document.
type Version struct {
	// Version is the document's version, "sha256:<hex>" (policy.Policy.Version).
	Version string
	Scope   Scope
	// AppliedAt is when it was applied (the applying dispatcher's clock).
	AppliedAt time.Time
	// AppliedBy is who applied it: the agent identity of an API caller,
	// "--policy" for the dispatcher flag.
	AppliedBy string
	Comment   string
	// Rules and Tests count the document's rules and tests.
	Rules, Tests int
}

func (r *record) version(s Scope) Version {
	return Version{Version: r.Version, Scope: s, AppliedAt: r.AppliedAt, AppliedBy: r.AppliedBy, Comment: r.Comment,
		Rules: r.Rules, Tests: r.Tests}
}

func decodeRecord(b []byte) (*record, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("policystore: undecodable in-force record: %w", err)
	}
	if !ValidVersion(r.Version) {
		return nil, fmt.Errorf("policystore: in-force record names no valid version (%q)", r.Version)
	}
	return &r, nil
}

// Document is a stored document: its version and its source as applied,
// comments kept.
type Document struct {
	Version Version
	Source  []byte
}

// Store reads and writes the policies bucket (bus.Bus.Policies): the
// documents by content hash, each scope's in-force record and its
// history. It holds no state of its own and is safe for concurrent use.
type Store struct {
	kv     jetstream.KeyValue
	nc     *nats.Conn
	js     jetstream.JetStream
	bucket string
	// changed is bus.PolicyChangedSubject.
	changed string
	log     *slog.Logger
	grace   time.Duration // pruneGrace; a test shortens it
}

// NewStore returns a Store over b's policies bucket; log may be nil.
func NewStore(b *bus.Bus, log *slog.Logger) *Store {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{kv: b.Policies, nc: b.NC, js: b.JS, bucket: b.Policies.Bucket(), changed: bus.PolicyChangedSubject(b.Config),
		log: log.With("component", "policystore"), grace: pruneGrace}
}

// ApplyOptions tune Apply.
type ApplyOptions struct {
	// AppliedBy and Comment are recorded with the apply.
	AppliedBy, Comment string
	// DryRun checks the document (parse, compile, tests) and says whether
	// it would change what is in force, without storing anything.
	DryRun bool
	// Lookup gives the document's tests the registry's tool specs; nil =
	// bare specs (policy.Policy.RunTests).
	Lookup policy.ToolLookup
}

// Applied is the result of an Apply.
type Applied struct {
	// Version is the document's: the record stored, or the one already
	// in force when nothing changed (with its own time, author and
	// comment), or, for a dry run that would change it, the record that
	// would be stored (AppliedAt zero).
	Version Version
	// Changed is false when the document was already the one in force.
	Changed bool
	// Revision is the in-force record's revision (the one written, or the
	// one already in force): Holder.Wait waits for it.
	Revision uint64
	// TestsPassed counts the document's tests, which all passed.
	TestsPassed int
	// Policy is the parsed document.
	Policy *policy.Policy
}

// Apply parses src (policy.Parse), runs its tests (policy.Policy.RunTests
// with o.Lookup) and, unless o.DryRun, stores it and puts it in force for
// scope. A document that does not parse is refused with the
// *policy.InvalidError (errors.Is policy.ErrInvalid) naming each problem's
// line; one whose tests fail with the *policy.TestsError (errors.Is
// policy.ErrTestsFailed) naming each failed test's line. Applying the
// version already in force changes nothing (Changed false) but the
// stored source, when only its comments or layout differ.
func (s *Store) Apply(ctx context.Context, scope Scope, src []byte, o ApplyOptions) (*Applied, error) {
	if !scope.valid() {
		return nil, ErrBadScope
	}
	if len(o.Comment) > MaxCommentBytes || !utf8.ValidString(o.Comment) {
		return nil, fmt.Errorf("%w: at most %d bytes of UTF-8", ErrBadComment, MaxCommentBytes)
	}
	p, err := policy.Parse(src) // refuses more than policy.MaxDocumentBytes before parsing
	if err != nil {
		return nil, fmt.Errorf("policystore: %w", err)
	}
	if err := p.RunTests(o.Lookup); err != nil {
		return nil, fmt.Errorf("policystore: %w", err)
	}
	out := &Applied{Policy: p, TestsPassed: p.Tests(), Changed: true}
	rec := &record{Version: p.Version(), AppliedBy: o.AppliedBy, Comment: o.Comment, Rules: len(p.Rules()), Tests: p.Tests()}
	out.Version = rec.version(scope)
	for attempt := 1; ; attempt++ {
		cur, rev, err := s.current(ctx, scope)
		if err != nil && !errors.Is(err, ErrNoPolicy) {
			return nil, err
		}
		if cur != nil && cur.Version == p.Version() {
			out.Changed, out.Version, out.Revision = false, cur.version(scope), rev
			if !o.DryRun {
				// The same rules; keep the newest comments and layout
				// for show, and the document itself if it went missing.
				if err := s.putDoc(ctx, scope, p, false); err != nil {
					return nil, err
				}
			}
			return out, nil
		}
		if o.DryRun {
			return out, nil
		}
		if attempt == 1 {
			if err := s.checkQuota(ctx, scope, p); err != nil {
				return nil, err
			}
			// Written again even when stored: a fresh write is what
			// keeps prune off a document about to be in force again.
			if err := s.putDoc(ctx, scope, p, true); err != nil {
				return nil, err
			}
		}
		rec.AppliedAt = time.Now().UTC()
		if out.Revision, err = s.putRecord(ctx, scope, rec, rev); err != nil {
			if errors.Is(err, jetstream.ErrKeyExists) && attempt < applyAttempts {
				continue // a concurrent apply: decide against what it wrote
			}
			return nil, err
		}
		break
	}
	out.Version = rec.version(scope)
	if err := s.nc.Publish(s.changed, []byte(scope.token())); err != nil {
		s.log.WarnContext(ctx, "policy change not announced; replicas see it through their watch", "err", err)
	}
	s.log.InfoContext(ctx, "policy applied", "scope", scope.String(), "version", rec.Version, "applied_by", rec.AppliedBy,
		"rules", rec.Rules, "tests", rec.Tests)
	if err := s.prune(ctx, scope); err != nil {
		s.log.WarnContext(ctx, "old policy documents not pruned", "scope", scope.String(), "err", err)
	}
	return out, nil
}

// applyAttempts bounds how often Apply reads the in-force record again
// when a concurrent apply of the scope wrote it first.
const applyAttempts = 5

// putRecord writes scope's in-force record, replacing revision rev (0:
// none yet), and returns its revision; jetstream.ErrKeyExists when
// another write came first.
func (s *Store) putRecord(ctx context.Context, scope Scope, rec *record, rev uint64) (uint64, error) {
	data, err := json.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("policystore: encode record: %w", err)
	}
	var out uint64
	if rev == 0 {
		out, err = s.kv.Create(ctx, currentKey(scope), data)
	} else {
		out, err = s.kv.Update(ctx, currentKey(scope), data, rev)
	}
	if err != nil {
		return 0, storeError(fmt.Sprintf("put %s in force", scope), err)
	}
	return out, nil
}

// storeError wraps a failed write: ErrQuota when the bucket is full.
func storeError(what string, err error) error {
	if bus.StoreFull(err) {
		return fmt.Errorf("%w: %s: the policies bucket is full: %w", ErrQuota, what, err)
	}
	return fmt.Errorf("policystore: %s: %w", what, err)
}

// putDoc stores p's source under its version as the key's only
// revision (a rollup: a new layout of the same rules replaces the old
// one, never piles up history). Unless always, a document stored with the
// same text (read from the leader) is left as it is.
func (s *Store) putDoc(ctx context.Context, scope Scope, p *policy.Policy, always bool) error {
	key := docKey(scope, p.Version())
	if !always {
		e, err := bus.KVGetFromLeader(ctx, s.nc, s.bucket, key)
		switch {
		case err == nil && bytes.Equal(e.Value, p.Source()):
			return nil
		case err != nil && !errors.Is(err, jetstream.ErrKeyNotFound):
			return fmt.Errorf("policystore: read document: %w", err)
		}
	}
	if _, err := bus.KVPutRollup(ctx, s.js, s.bucket, key, p.Source()); err != nil {
		return storeError(fmt.Sprintf("store document (%d bytes)", len(p.Source())), err)
	}
	return nil
}

// current returns scope's in-force record as the bucket's leader has it,
// ErrNoPolicy without one, and the revision of the key's latest entry (a
// removal's included; 0 when never written) for a compare-and-set. A
// direct get (any replica) could return a record a later apply replaced,
// and Apply would take a version for the one in force when it is not.
func (s *Store) current(ctx context.Context, scope Scope) (*record, uint64, error) {
	e, err := bus.KVGetFromLeader(ctx, s.nc, s.bucket, currentKey(scope))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		var rev uint64
		if e != nil {
			rev = e.Revision
		}
		return nil, rev, ErrNoPolicy
	}
	if err != nil {
		return nil, 0, fmt.Errorf("policystore: read %s in force: %w", scope, err)
	}
	rec, err := decodeRecord(e.Value)
	return rec, e.Revision, err
}

// Current returns the document in force for scope (its own: a tenant
// without one gets ErrNoPolicy, not the installation's).
func (s *Store) Current(ctx context.Context, scope Scope) (*Document, error) {
	if !scope.valid() {
		return nil, ErrBadScope
	}
	rec, _, err := s.current(ctx, scope)
	if err != nil {
		return nil, err
	}
	src, err := s.source(ctx, scope, rec.Version)
	if err != nil {
		return nil, err
	}
	return &Document{Version: rec.version(scope), Source: src}, nil
}

// Get returns scope's document of version: with its latest apply record
// when the history still holds one, else with the version alone.
func (s *Store) Get(ctx context.Context, scope Scope, version string) (*Document, error) {
	if !scope.valid() {
		return nil, ErrBadScope
	}
	if !ValidVersion(version) {
		return nil, fmt.Errorf("%w: %q is not sha256:<64 hex digits>", ErrUnknownVersion, version)
	}
	src, err := s.source(ctx, scope, version)
	if err != nil {
		return nil, err
	}
	doc := &Document{Version: Version{Version: version, Scope: scope}, Source: src}
	hist, err := s.History(ctx, scope, HistoryDepth)
	if err != nil && !errors.Is(err, ErrNoPolicy) {
		return nil, err
	}
	if i := slices.IndexFunc(hist, func(v Version) bool { return v.Version == version }); i >= 0 {
		doc.Version = hist[i]
	}
	return doc, nil
}

func (s *Store) source(ctx context.Context, scope Scope, version string) ([]byte, error) {
	e, err := bus.KVGetFromLeader(ctx, s.nc, s.bucket, docKey(scope, version))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %s has no document %s (never applied, or pruned)", ErrUnknownVersion, scope, version)
	}
	if err != nil {
		return nil, fmt.Errorf("policystore: read document %s: %w", version, err)
	}
	return e.Value, nil
}

// History lists scope's applies, newest first, at most limit (at most
// HistoryDepth are kept). The first is in force. ErrNoPolicy when the
// scope never had a document.
func (s *Store) History(ctx context.Context, scope Scope, limit int) ([]Version, error) {
	if !scope.valid() {
		return nil, ErrBadScope
	}
	if limit <= 0 || limit > HistoryDepth {
		limit = HistoryDepth
	}
	ents, err := s.kv.History(ctx, currentKey(scope))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrNoPolicy
	}
	if err != nil {
		return nil, fmt.Errorf("policystore: history of %s: %w", scope, err)
	}
	var out []Version
	for _, e := range slices.Backward(ents) {
		if len(out) == limit {
			break
		}
		if e.Operation() != jetstream.KeyValuePut {
			continue // a removal
		}
		rec, err := decodeRecord(e.Value())
		if err != nil {
			s.log.WarnContext(ctx, "undecodable policy history entry skipped", "scope", scope.String(), "revision", e.Revision(), "err", err)
			continue
		}
		out = append(out, rec.version(scope))
	}
	return out, nil
}

// Remove takes scope's document out of force: a tenant falls back to the
// installation document, the installation to no policy. The documents and
// the history stay. It reports whether scope had a document in force, and
// the removal's revision (Holder.Wait with version "" and it waits for
// it); the removal is a compare-and-set against the record read from the
// leader, announced like an apply.
func (s *Store) Remove(ctx context.Context, scope Scope) (removed bool, revision uint64, err error) {
	if !scope.valid() {
		return false, 0, ErrBadScope
	}
	for attempt := 1; ; attempt++ {
		_, rev, err := s.current(ctx, scope)
		if errors.Is(err, ErrNoPolicy) {
			return false, 0, nil
		}
		if err != nil {
			return false, 0, err
		}
		err = s.kv.Delete(ctx, currentKey(scope), jetstream.LastRevision(rev))
		if err == nil {
			break
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !bus.IsWrongLastSequence(err) || attempt == applyAttempts {
			return false, 0, storeError(fmt.Sprintf("remove %s", scope), err)
		}
	}
	_, rev, err := s.current(ctx, scope)
	if !errors.Is(err, ErrNoPolicy) && err != nil {
		return true, 0, err
	}
	if err := s.nc.Publish(s.changed, []byte(scope.token())); err != nil {
		s.log.WarnContext(ctx, "policy removal not announced; replicas see it through their watch", "err", err)
	}
	s.log.InfoContext(ctx, "policy removed", "scope", scope.String())
	return true, rev, nil
}

// pruneGrace is how recently written a document must be for prune to
// keep it whatever the history says: a concurrent Apply writes its
// document (again, when it puts an old version back in force) before the
// record that names it.
const pruneGrace = time.Minute

// docMeta describes one stored document of a scope.
type docMeta struct {
	version string
	bytes   int
	written time.Time
}

// checkQuota refuses p when storing it would take scope past
// ScopeQuotaBytes or ScopeMaxDocuments, after pruning what can be.
func (s *Store) checkQuota(ctx context.Context, scope Scope, p *policy.Policy) error {
	for pruned := false; ; pruned = true {
		docs, err := s.docs(ctx, scope)
		if err != nil {
			return err
		}
		n, used := 1, len(p.Source())
		for _, d := range docs {
			if d.version != p.Version() {
				n, used = n+1, used+d.bytes
			}
		}
		if n <= ScopeMaxDocuments && used <= ScopeQuotaBytes {
			return nil
		}
		if pruned {
			return fmt.Errorf("%w: %s would hold %d documents of %d bytes (at most %d, %d bytes); documents applied in the last %s are kept, so retry then",
				ErrQuota, scope, n, used, ScopeMaxDocuments, ScopeQuotaBytes, s.grace)
		}
		if err := s.prune(ctx, scope); err != nil {
			return err
		}
	}
}

// prune removes scope's documents but the newest history entry's and those
// of the next newest versions while they number KeepDocuments and take
// ScopeQuotaBytes/2, keeping any written in the last grace (see
// pruneGrace). A removed document leaves nothing in the bucket: its
// subject is purged from the stream (a KV purge would leave a marker for
// ever).
func (s *Store) prune(ctx context.Context, scope Scope) error {
	docs, err := s.docs(ctx, scope)
	if err != nil || len(docs) <= 1 {
		return err
	}
	size := make(map[string]int, len(docs))
	for _, d := range docs {
		size[d.version] = d.bytes
	}
	hist, err := s.History(ctx, scope, HistoryDepth)
	if err != nil && !errors.Is(err, ErrNoPolicy) {
		return err
	}
	keep := map[string]bool{}
	kept := 0
	for i, v := range hist {
		if keep[v.Version] {
			continue
		}
		if i > 0 && (len(keep) == KeepDocuments || kept+size[v.Version] > ScopeQuotaBytes/2) {
			break
		}
		keep[v.Version] = true
		kept += size[v.Version]
	}
	stream, err := s.js.Stream(ctx, "KV_"+s.bucket)
	if err != nil {
		return fmt.Errorf("policystore: prune: %w", err)
	}
	for _, d := range docs {
		if keep[d.version] || time.Since(d.written) < s.grace {
			continue
		}
		subject := "$KV." + s.bucket + "." + docKey(scope, d.version)
		if err := stream.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
			return fmt.Errorf("policystore: prune %s: %w", subject, err)
		}
	}
	return nil
}

// docs lists scope's stored documents, read with their headers only: the
// server tells each one's size (Nats-Msg-Size) without its body. Each
// attempt is bounded, and one that finds the bucket's stream without a
// leader (an election under way) is made again until ctx ends: a request
// lost in a failover must not hold an apply for as long as its context.
func (s *Store) docs(ctx context.Context, scope Scope) ([]docMeta, error) {
	var out []docMeta
	err := bus.LeaderRetry(ctx, docsAttempt, func(ctx context.Context) error {
		var err error
		out, err = s.docsOnce(ctx, scope)
		return err
	})
	return out, err
}

// docsAttempt bounds one attempt of docs.
const docsAttempt = 10 * time.Second

func (s *Store) docsOnce(ctx context.Context, scope Scope) ([]docMeta, error) {
	prefix := "$KV." + s.bucket + "." + docPrefix + scope.token() + "."
	stream, err := s.js.Stream(ctx, "KV_"+s.bucket)
	if err != nil {
		return nil, fmt.Errorf("policystore: list documents: %w", err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(prefix+"*"))
	if err != nil {
		return nil, fmt.Errorf("policystore: list documents: %w", err)
	}
	n := len(info.State.Subjects)
	if n == 0 {
		return nil, nil
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{prefix + "*"},
		DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy, HeadersOnly: true})
	if err != nil {
		return nil, fmt.Errorf("policystore: list documents: %w", err)
	}
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		return nil, fmt.Errorf("policystore: list documents: %w", err)
	}
	out := make([]docMeta, 0, n)
	for m := range batch.Messages() {
		if m.Headers().Get("KV-Operation") != "" {
			continue // a purge marker of an older build
		}
		md, err := m.Metadata()
		if err != nil {
			continue
		}
		size, _ := strconv.Atoi(m.Headers().Get("Nats-Msg-Size"))
		out = append(out, docMeta{version: "sha256:" + strings.TrimPrefix(m.Subject(), prefix), bytes: size, written: md.Timestamp})
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
		return nil, fmt.Errorf("policystore: list documents: %w", err)
	}
	return out, nil
}
