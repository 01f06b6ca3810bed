package bus

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Config is the JetStream layout of one installation. The zero value is
// valid after WithDefaults.
type Config struct {
	// Prefix starts every subject and names every stream and bucket, so that
	// several installations can share a cluster. Default "toolwire".
	Prefix string
	// Replicas of every stream and bucket. Default 1; use 3 on a cluster.
	Replicas int
	// CallsMaxAge is the audit horizon of calls. Default 720h (30 days).
	CallsMaxAge time.Duration
	// CallsMaxBytes bounds the calls stream; a full stream rejects new calls
	// (OVERLOADED). Default 4 GiB; -1 = unbounded.
	CallsMaxBytes int64
	// The byte limits of the other streams and buckets: Stores lists them
	// all with what happens when each is full. Each -1 = unbounded, which
	// lets the store fill the server's. The defaults, with CallsMaxBytes,
	// sum to 8 GiB (ReservedBytes), which every server holding a replica
	// reserves and which must fit in its max_file_store.

	// ResultsMaxBytes bounds the results stream. Default 2 GiB.
	ResultsMaxBytes int64
	// EventsMaxBytes bounds the events stream. Default 1 GiB.
	EventsMaxBytes int64
	// DLQMaxBytes bounds the dead-letter stream. Default 128 MiB.
	DLQMaxBytes int64
	// RetriesMaxBytes bounds the stream of parked retries. Default 128 MiB.
	RetriesMaxBytes int64
	// AdvisoriesMaxBytes bounds the captured MaxDeliver advisories.
	// Default 32 MiB.
	AdvisoriesMaxBytes int64
	// CancelsMaxBytes bounds the cancel bucket. Default 32 MiB.
	CancelsMaxBytes int64
	// IdempotencyMaxBytes bounds the idempotency bucket. Default 128 MiB.
	IdempotencyMaxBytes int64
	// RegistryMaxBytes bounds the registry bucket. Default 32 MiB.
	RegistryMaxBytes int64
	// SessionsMaxBytes bounds the session bucket. Default 32 MiB.
	SessionsMaxBytes int64
	// PoliciesMaxBytes bounds the policy bucket. Default 32 MiB.
	PoliciesMaxBytes int64
	// ApprovalsMaxBytes bounds the approvals bucket (parked calls, approval
	// records, grants). Default 96 MiB.
	ApprovalsMaxBytes int64
	// LimitsMaxBytes bounds the limits bucket (rate, concurrency, budget
	// and loop-guard counts; internal/limits). Default 64 MiB.
	LimitsMaxBytes int64
	// TasksMaxBytes bounds the MCP tasks bucket. Default 32 MiB.
	TasksMaxBytes int64
	// RevocationsMaxBytes bounds the dashboard's sign-out records
	// (internal/dashboard). Default 8 MiB.
	RevocationsMaxBytes int64
	// DelegationMaxBytes bounds the delegation counters (a parent call's
	// children, a chain's calls; internal/dispatch). Default 32 MiB.
	DelegationMaxBytes int64
	// BlobsMaxBytes bounds the blob object store. Default 248 MiB.
	BlobsMaxBytes int64
	// ResultsMaxAge is the audit horizon of results. Default CallsMaxAge.
	ResultsMaxAge time.Duration
	// EventsMaxAge is how long lifecycle events are kept. Default 72h.
	EventsMaxAge time.Duration
	// DLQMaxAge is how long dead letters are kept. Default CallsMaxAge.
	DLQMaxAge time.Duration
	// DuplicateWindow is the calls stream's dedup window; at least the
	// dispatcher's retry horizon. Default 10m.
	DuplicateWindow time.Duration
	// IdempotencyTTL is how long an idempotency key stays bound to its
	// call (the idempotency bucket's TTL): a repeat of the key within it
	// answers that call. A key is useful only while its call's record
	// exists, so it follows the calls' retention: default CallsMaxAge, and
	// at most CallsMaxAge; at least DuplicateWindow, so that a key outlives
	// every publish of its call and the release of a refused one. A
	// shorter one keeps the bucket smaller (about
	// 313 bytes a keyed call for this long).
	IdempotencyTTL time.Duration
	// CancelTTL is how long a cancel tombstone lives. Default 24h.
	CancelTTL time.Duration
	// RegistryHistory is how many versions of a key the registry keeps.
	// Default 10.
	RegistryHistory int
	// RetentionWindow, set when an archive (internal/archive) keeps the
	// record, is the live window of the archived streams: the MaxAge of
	// the calls and results streams, and of the events stream when below
	// EventsMaxAge; older messages are read from the archive. It changes
	// no other store: sessions, retries, dead letters, blobs and approval
	// records keep the ages that follow CallsMaxAge and ResultsMaxAge
	// (720h by default), and only the idempotency keys follow it
	// (IdempotencyTTL's default and bound are the calls' window). With it
	// the layout never lowers a live archived stream's MaxAge at open:
	// only the archiver does, once it has archived past the cut (see
	// ArchiveHoldMetadata). 0 = no archive: the streams keep CallsMaxAge,
	// ResultsMaxAge and EventsMaxAge.
	RetentionWindow time.Duration
	// DesignRate, when positive, is the calls a second the installation
	// is sized for: each store that every call writes — calls, results,
	// events — and the idempotency bucket, whose byte limit is not given,
	// holds its window at that rate (SizedFor). 0 = the fixed defaults.
	DesignRate float64
}

// CallsWindow is the calls stream's MaxAge: RetentionWindow with an
// archive, CallsMaxAge without.
func (c Config) CallsWindow() time.Duration { return cmp.Or(c.RetentionWindow, c.CallsMaxAge) }

// ResultsWindow is the results stream's MaxAge: RetentionWindow with an
// archive, ResultsMaxAge without.
func (c Config) ResultsWindow() time.Duration { return cmp.Or(c.RetentionWindow, c.ResultsMaxAge) }

// EventsWindow is the events stream's MaxAge: EventsMaxAge, or
// RetentionWindow when that is shorter.
func (c Config) EventsWindow() time.Duration {
	if c.RetentionWindow > 0 {
		return min(c.RetentionWindow, c.EventsMaxAge)
	}
	return c.EventsMaxAge
}

var prefixRe = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`)

// WithDefaults returns a copy of c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.Prefix = cmp.Or(c.Prefix, "toolwire")
	c.Replicas = cmp.Or(c.Replicas, 1)
	c.CallsMaxAge = cmp.Or(c.CallsMaxAge, 720*time.Hour)
	c.ResultsMaxAge = cmp.Or(c.ResultsMaxAge, c.CallsMaxAge)
	c.EventsMaxAge = cmp.Or(c.EventsMaxAge, 72*time.Hour)
	c.DLQMaxAge = cmp.Or(c.DLQMaxAge, c.CallsMaxAge)
	c.DuplicateWindow = cmp.Or(c.DuplicateWindow, 10*time.Minute)
	c.IdempotencyTTL = cmp.Or(c.IdempotencyTTL, c.CallsWindow())
	if c.DesignRate > 0 {
		c.sizeForRate()
	}
	for _, l := range c.byteLimits() {
		*l.field = cmp.Or(*l.field, l.def)
	}
	c.CancelTTL = cmp.Or(c.CancelTTL, 24*time.Hour)
	c.RegistryHistory = cmp.Or(c.RegistryHistory, 10)
	return c
}

// Validate returns an error naming the first invalid field.
func (c Config) Validate() error {
	var errs []error
	if !prefixRe.MatchString(c.Prefix) {
		errs = append(errs, fmt.Errorf("bus: Prefix %q must match %s", c.Prefix, prefixRe))
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("bus: Replicas %d must be 1..5", c.Replicas))
	}
	for _, l := range c.byteLimits() {
		if *l.field == 0 || *l.field < -1 {
			errs = append(errs, fmt.Errorf("bus: %s %d must be positive or -1", l.name, *l.field))
		}
	}
	if c.DesignRate < 0 || c.DesignRate > MaxDesignRate || math.IsNaN(c.DesignRate) {
		errs = append(errs, fmt.Errorf("bus: DesignRate %v must be a number of calls a second from 0 to %d", c.DesignRate, MaxDesignRate))
	}
	if c.RetentionWindow < 0 {
		errs = append(errs, fmt.Errorf("bus: RetentionWindow %s is negative", c.RetentionWindow))
	}
	window := "CallsMaxAge"
	if c.RetentionWindow > 0 {
		window = "RetentionWindow"
	}
	if c.DuplicateWindow > c.CallsWindow() {
		errs = append(errs, fmt.Errorf("bus: DuplicateWindow %s exceeds %s %s", c.DuplicateWindow, window, c.CallsWindow()))
	}
	if c.IdempotencyTTL < 0 || c.IdempotencyTTL > c.CallsWindow() {
		errs = append(errs, fmt.Errorf("bus: IdempotencyTTL %s must be positive and at most %s %s (a key outliving its call's live record answers with a call that is gone)",
			c.IdempotencyTTL, window, c.CallsWindow()))
	}
	if c.IdempotencyTTL > 0 && c.IdempotencyTTL < c.DuplicateWindow {
		errs = append(errs, fmt.Errorf("bus: IdempotencyTTL %s is below DuplicateWindow %s: a key must outlive every publish of its call under its message id (a key that expires while its call may still be published or released lets a second call take it)",
			c.IdempotencyTTL, c.DuplicateWindow))
	}
	if c.RegistryHistory < 1 || c.RegistryHistory > 64 {
		errs = append(errs, fmt.Errorf("bus: RegistryHistory %d must be 1..64", c.RegistryHistory))
	}
	return errors.Join(errs...)
}

// Subjects returns the subject builder of c.
func (c Config) Subjects() Subjects { return Subjects{Prefix: c.Prefix} }

func (c Config) upper() string { return strings.ToUpper(strings.ReplaceAll(c.Prefix, "-", "_")) }

// CallsStream is the name of the calls stream.
func (c Config) CallsStream() string { return c.upper() + "_CALLS" }

// ResultsStream is the name of the results stream.
func (c Config) ResultsStream() string { return c.upper() + "_RESULTS" }

// EventsStream is the name of the events stream.
func (c Config) EventsStream() string { return c.upper() + "_EVENTS" }

// DLQStream is the name of the dead-letter stream.
func (c Config) DLQStream() string { return c.upper() + "_DLQ" }

// RetriesStream is the name of the stream of scheduled retries.
func (c Config) RetriesStream() string { return c.upper() + "_RETRIES" }

// MoverConsumer is the durable consumer that puts due retries back on CALLS.
func (c Config) MoverConsumer() string { return c.Prefix + "_retry_mover" }

// AdvisoriesStream is the name of the stream capturing MaxDeliver advisories.
func (c Config) AdvisoriesStream() string { return c.upper() + "_ADVISORIES" }

// IdempotencyBucket is the name of the idempotency-key KV bucket.
func (c Config) IdempotencyBucket() string { return c.Prefix + "_idempotency" }

// ReaperConsumer is the durable consumer that dead-letters exhausted calls.
func (c Config) ReaperConsumer() string { return c.Prefix + "_reaper" }

// CancelBucket is the name of the cancel KV bucket.
func (c Config) CancelBucket() string { return c.Prefix + "_cancels" }

// SessionsBucket is the name of the session-state KV bucket.
func (c Config) SessionsBucket() string { return c.Prefix + "_sessions" }

// PoliciesBucket is the name of the policy KV bucket.
func (c Config) PoliciesBucket() string { return c.Prefix + "_policies" }

// ApprovalsBucket is the name of the approvals KV bucket.
func (c Config) ApprovalsBucket() string { return c.Prefix + "_approvals" }

// TasksBucket is the name of the MCP tasks KV bucket.
func (c Config) TasksBucket() string { return c.Prefix + "_tasks" }

// LimitsBucket is the name of the limits KV bucket.
func (c Config) LimitsBucket() string { return c.Prefix + "_limits" }

// RevocationsBucket is the name of the KV bucket of the dashboard's
// sign-out records: one key per API key that signed out, holding the time
// before which that key's sessions are ended, kept (a per-key TTL) until
// every such session has expired (internal/dashboard). Dispatchers only.
func (c Config) RevocationsBucket() string { return c.Prefix + "_revocations" }

// ArchiveBucket is the KV bucket of the installation's archivers (the
// lease and each stream's progress; internal/archive), which an archiver
// makes when it first starts.
func (c Config) ArchiveBucket() string { return c.Prefix + "_archive" }

// RevocationsMaxAge is the revocations bucket's age limit, a backstop
// behind each record's own TTL (the dashboard's session lifetime plus a
// clock-skew margin, which must not exceed it): no record outlives it,
// whatever wrote it.
const RevocationsMaxAge = 25 * time.Hour

// DelegationStream is the name of the counter stream (AllowMsgCounter)
// of the delegation chains: per parent call, the count of the calls made
// on its behalf (DelegationChildren), and per root call, the count of its
// chain's calls (DelegationDescendants), which the dispatchers' admission
// adds to and reads in one request (AddToCounter; internal/dispatch,
// "Delegation chains"). Dispatchers only.
func (c Config) DelegationStream() string { return c.upper() + "_DELEGATION" }

// RegistryBucket is the name of the registry KV bucket.
func (c Config) RegistryBucket() string { return c.Prefix + "_registry" }

// BlobBucket is the name of the blob Object Store bucket.
func (c Config) BlobBucket() string { return c.Prefix + "_blobs" }

// PoolConsumer is the durable name of a pool's consumer.
func (c Config) PoolConsumer(pool string) string { return c.Prefix + "_pool_" + Token(pool) }

// IsPoolConsumer reports whether ci is a worker pool's consumer: a durable
// named by PoolConsumer. Every other consumer of the calls stream (an
// audit's or a replay's ordered consumer, an operator's own) delivers to
// no worker: it never makes a call runnable, and never blocks a pool.
func (c Config) IsPoolConsumer(ci *jetstream.ConsumerInfo) bool {
	return ci != nil && ci.Config.Durable != "" && strings.HasPrefix(ci.Name, c.Prefix+"_pool_")
}
