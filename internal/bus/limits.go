package bus

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Store is one stream or bucket of the layout with the limits Open gives
// it.
type Store struct {
	// Name is the store's short name, as --stream-max-bytes takes it:
	// calls, results, events, dlq, retries, advisories, cancels,
	// idempotency, registry, sessions, policies, approvals, limits, tasks,
	// revocations, delegation, blobs.
	Name string
	// Stream is the JetStream stream that holds it (KV_<bucket> and
	// OBJ_<bucket> for buckets).
	Stream string
	// MaxBytes is its byte limit; -1 = unbounded.
	MaxBytes int64
	// MaxAge is how long a message (a key, an object) is kept; 0 = until
	// MaxBytes pushes it out, or for ever.
	MaxAge time.Duration
	// DiscardNew: when the store is full it refuses writes. Otherwise it
	// drops its oldest messages to take new ones.
	DiscardNew bool
	// Use says which admitted calls may write the store.
	Use CallUse
}

// CallUse says which admitted calls may write a store: a dispatcher
// refuses new calls before such a store fills (internal/dispatch).
type CallUse int

const (
	// UsedByNoCall: written on other paths only (dead letters, advisories,
	// cancel requests, tool registration, intents applied to sessions).
	UsedByNoCall CallUse = iota
	// UsedByEveryCall: any admitted call may write it (the call itself,
	// its events, its result, a parked retry, a large output).
	UsedByEveryCall
	// UsedByKeyedCalls: only calls with an idempotency key write it.
	UsedByKeyedCalls
)

// advisoriesMaxAge is how long MaxDeliver advisories are kept: the reaper
// reads them at once, so this only matters while no dispatcher runs.
const advisoriesMaxAge = 7 * 24 * time.Hour

// The bytes a call takes in each store that scales with calls, as
// Config.DesignRate sizes them: what the soak measured for a small call
// (CALLS 377, RESULTS 374, EVENTS 156 × 1.5, an idempotency key 313;
// docs/reliability.md) with room for arguments and inline outputs of a
// hundred bytes or so more. Larger calls need --stream-max-bytes
// (toolctl store status gives each store's bytes per call).
const (
	designCallBytes   = 512
	designResultBytes = 512
	designEventBytes  = 384 // the events of one call
	designKeyBytes    = 400
)

// designHold is what an archived stream may keep past its window while
// the archive is behind: the archiver's largest hold (archive.Config's
// HoldAhead, 6h by default).
const designHold = 6 * time.Hour

// MaxDesignRate bounds DesignRate: a million calls a second over a week
// is about 400 TiB a store, far past any one server, and the sum of the
// stores stays within an int64.
const MaxDesignRate = 1_000_000

// designHeadroom is the share above the sized bytes: the calls stream and
// the idempotency bucket refuse calls at 90% of their limit.
const designHeadroom = 1.25

// SizedFor is the byte limit that holds window of a store taking
// perCall bytes a call at rate calls a second, with designHeadroom,
// rounded up to a MiB; never below def (the fixed default).
func SizedFor(rate float64, perCall int64, window time.Duration, def int64) int64 {
	b := rate * float64(perCall) * window.Seconds() * designHeadroom
	if b >= float64(1<<62) {
		return 1 << 62
	}
	n := (int64(b) + 1<<20 - 1) &^ (1<<20 - 1)
	return max(n, def)
}

// sizeForRate sizes the stores that scale with calls, whose byte limit is
// not given, for DesignRate over their windows (an archived stream's
// window plus designHold); the idempotency bucket as if every call had a
// key.
func (c *Config) sizeForRate() {
	hold := time.Duration(0)
	if c.RetentionWindow > 0 {
		hold = designHold
	}
	for _, s := range []struct {
		field   *int64
		perCall int64
		window  time.Duration
	}{
		{&c.CallsMaxBytes, designCallBytes, c.CallsWindow() + hold},
		{&c.ResultsMaxBytes, designResultBytes, c.ResultsWindow() + hold},
		{&c.EventsMaxBytes, designEventBytes, c.EventsWindow() + hold},
		{&c.IdempotencyMaxBytes, designKeyBytes, c.IdempotencyTTL},
	} {
		if *s.field == 0 {
			*s.field = SizedFor(c.DesignRate, s.perCall, s.window, c.defaultOf(s.field))
		}
	}
}

// defaultOf is the fixed default of the byte limit field.
func (c *Config) defaultOf(field *int64) int64 {
	for _, l := range c.byteLimits() {
		if l.field == field {
			return l.def
		}
	}
	return 0
}

// byteLimit is one MaxBytes field of Config with its store and default.
type byteLimit struct {
	field *int64
	name  string // the Config field
	store string // Store.Name
	def   int64
}

func (c *Config) byteLimits() []byteLimit {
	return []byteLimit{
		{&c.CallsMaxBytes, "CallsMaxBytes", "calls", 4 << 30},
		{&c.ResultsMaxBytes, "ResultsMaxBytes", "results", 2 << 30},
		{&c.EventsMaxBytes, "EventsMaxBytes", "events", 1 << 30},
		{&c.DLQMaxBytes, "DLQMaxBytes", "dlq", 128 << 20},
		{&c.RetriesMaxBytes, "RetriesMaxBytes", "retries", 128 << 20},
		{&c.AdvisoriesMaxBytes, "AdvisoriesMaxBytes", "advisories", 32 << 20},
		{&c.CancelsMaxBytes, "CancelsMaxBytes", "cancels", 32 << 20},
		{&c.IdempotencyMaxBytes, "IdempotencyMaxBytes", "idempotency", 128 << 20},
		{&c.RegistryMaxBytes, "RegistryMaxBytes", "registry", 32 << 20},
		{&c.SessionsMaxBytes, "SessionsMaxBytes", "sessions", 32 << 20},
		{&c.PoliciesMaxBytes, "PoliciesMaxBytes", "policies", 32 << 20},
		{&c.ApprovalsMaxBytes, "ApprovalsMaxBytes", "approvals", 96 << 20},
		{&c.LimitsMaxBytes, "LimitsMaxBytes", "limits", 64 << 20},
		{&c.TasksMaxBytes, "TasksMaxBytes", "tasks", 32 << 20},
		{&c.RevocationsMaxBytes, "RevocationsMaxBytes", "revocations", 8 << 20},
		{&c.DelegationMaxBytes, "DelegationMaxBytes", "delegation", 32 << 20},
		{&c.BlobsMaxBytes, "BlobsMaxBytes", "blobs", 248 << 20},
	}
}

// Stores lists every stream and bucket of c (after WithDefaults) with its
// limits, in layout order.
func (c Config) Stores() []Store {
	kv, obj := func(b string) string { return "KV_" + b }, func(b string) string { return "OBJ_" + b }
	return []Store{
		{"calls", c.CallsStream(), c.CallsMaxBytes, c.CallsWindow(), true, UsedByEveryCall},
		{"results", c.ResultsStream(), c.ResultsMaxBytes, c.ResultsWindow(), false, UsedByEveryCall},
		{"events", c.EventsStream(), c.EventsMaxBytes, c.EventsWindow(), false, UsedByEveryCall},
		{"dlq", c.DLQStream(), c.DLQMaxBytes, c.DLQMaxAge, false, UsedByNoCall},
		{"retries", c.RetriesStream(), c.RetriesMaxBytes, c.CallsMaxAge, false, UsedByEveryCall},
		{"advisories", c.AdvisoriesStream(), c.AdvisoriesMaxBytes, advisoriesMaxAge, false, UsedByNoCall},
		{"cancels", kv(c.CancelBucket()), c.CancelsMaxBytes, c.CancelTTL, true, UsedByNoCall},
		{"idempotency", kv(c.IdempotencyBucket()), c.IdempotencyMaxBytes, c.IdempotencyTTL, true, UsedByKeyedCalls},
		{"registry", kv(c.RegistryBucket()), c.RegistryMaxBytes, 0, true, UsedByNoCall},
		{"sessions", kv(c.SessionsBucket()), c.SessionsMaxBytes, c.CallsMaxAge, true, UsedByNoCall},
		{"policies", kv(c.PoliciesBucket()), c.PoliciesMaxBytes, 0, true, UsedByNoCall},
		{"approvals", kv(c.ApprovalsBucket()), c.ApprovalsMaxBytes, 0, true, UsedByNoCall},
		{"limits", kv(c.LimitsBucket()), c.LimitsMaxBytes, 0, true, UsedByNoCall},
		{"tasks", kv(c.TasksBucket()), c.TasksMaxBytes, TasksTTL, true, UsedByNoCall},
		{"revocations", kv(c.RevocationsBucket()), c.RevocationsMaxBytes, RevocationsMaxAge, true, UsedByNoCall},
		// Counters (a counter stream cannot be discard-new): full, it
		// drops the counter updated longest ago. Delegated calls write it,
		// but it never refuses one.
		{"delegation", c.DelegationStream(), c.DelegationMaxBytes, c.CancelTTL, false, UsedByNoCall},
		// Blobs are copies: a worker that cannot store one keeps the cut
		// response inline, so a full blob store never refuses admission.
		{"blobs", obj(c.BlobBucket()), c.BlobsMaxBytes, c.ResultsMaxAge, true, UsedByNoCall},
	}
}

// ReservedBytes is what the layout reserves on every server that holds a
// replica of its streams: the sum of the bounded stores' MaxBytes. It must
// fit in the server's max_file_store (the embedded server's MaxStore).
func (c Config) ReservedBytes() int64 {
	var n int64
	for _, s := range c.Stores() {
		n += max(s.MaxBytes, 0)
	}
	return n
}

// SetMaxBytes sets the byte limit of the store named store (a Store.Name).
func (c *Config) SetMaxBytes(store string, n int64) error {
	var names []string
	for _, l := range c.byteLimits() {
		if l.store == store {
			*l.field = n
			return nil
		}
		names = append(names, l.store)
	}
	return fmt.Errorf("bus: no store %q (want one of %s)", store, strings.Join(names, ", "))
}

// ParseMaxBytes reads "store=size,store=size" (e.g. "results=8GiB,blobs=1GiB")
// into c's byte limits; size as ParseBytes reads it.
func (c *Config) ParseMaxBytes(s string) error {
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, size, ok := strings.Cut(part, "=")
		if !ok {
			return fmt.Errorf("bus: %q: want store=size", part)
		}
		n, err := ParseBytes(strings.TrimSpace(size))
		if err != nil {
			return err
		}
		if err := c.SetMaxBytes(strings.TrimSpace(name), n); err != nil {
			return err
		}
	}
	return nil
}

// ParseBytes reads a size in bytes: a whole number, optionally with the
// suffix KiB, MiB, GiB or TiB; -1 = unbounded.
func ParseBytes(s string) (int64, error) {
	if s == "-1" {
		return -1, nil
	}
	mult := int64(1)
	for i, suffix := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if rest, ok := strings.CutSuffix(s, suffix); ok {
			s, mult = rest, int64(1)<<(10*(i+1))
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("bus: size %q: want a positive number of bytes, optionally with KiB, MiB, GiB or TiB, or -1", s)
	}
	return n * mult, nil
}

// IsStorageExhausted reports whether err is a server refusing a stream
// because its limits do not fit the storage left (error 10047).
func IsStorageExhausted(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == 10047
}

// storeFullHint completes the error of a stream the server refused for
// want of storage.
func (c Config) storeFullHint(err error) error {
	if !IsStorageExhausted(err) {
		return err
	}
	lower := "lower the limits with --stream-max-bytes"
	if c.DesignRate > 0 {
		lower = fmt.Sprintf("lower --design-rate (%g calls a second) or give the limits with --stream-max-bytes", c.DesignRate)
	}
	return fmt.Errorf("%w (the layout reserves %s on each server, the sum of its stores' byte limits: raise the server's max_file_store or %s)",
		err, FormatBytes(c.ReservedBytes()), lower)
}

// FormatBytes renders n in the largest binary unit that divides it, as
// ParseBytes reads it.
func FormatBytes(n int64) string {
	if n < 0 {
		return "unbounded"
	}
	units := []string{"TiB", "GiB", "MiB", "KiB"}
	for i, u := range units {
		size := int64(1) << (10 * (len(units) - i))
		if n >= size && n%size == 0 {
			return strconv.FormatInt(n/size, 10) + u
		}
	}
	return strconv.FormatInt(n, 10)
}

// StoreNames lists the names SetMaxBytes takes, in layout order.
func StoreNames() []string {
	var c Config
	names := []string{}
	for _, l := range c.byteLimits() {
		names = append(names, l.store)
	}
	return names
}
