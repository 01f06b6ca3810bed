package dispatch

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"time"

	"gocloud.dev/blob"

	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/maintenance"
	"github.com/toolwire/toolwire/internal/poolview"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/internal/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// Config configures a Dispatcher.
type Config struct {
	// Archive, if set, is the archive store (internal/archive): the
	// dispatcher runs an archiver (one active across replicas) that seals
	// the calls, results and events streams' closed periods into it and
	// holds a stream's MaxAge over what is not archived yet. Nil = no
	// archive: the streams keep their MaxAge alone, as before. The
	// caller closes it.
	Archive *blob.Bucket
	// ArchiveSegment is the period one archive segment covers. Default
	// 1h (archive.Config.Segment).
	ArchiveSegment time.Duration
	// ArchiveSettle and ArchiveEvery are the archiver's Settle (how long
	// after a period ends it is sealed) and Every (how often it looks).
	// Defaults 1m and 30s (archive.Config); tests and soaks shorten them.
	ArchiveSettle, ArchiveEvery time.Duration
	// Policies gives the policy in force per tenant (policy.go); nil = no
	// policy: every call allowed, but tools that require approval ask.
	Policies PolicySource
	// ApprovalTTL is how long a call an ask decision parked waits for an
	// approver; then it expires (EXPIRED answer, APPROVAL_EXPIRED event).
	// It is also the life of an approval token, and of an approval's
	// binding for a call that has no schedule-to-close deadline. Default
	// 24h.
	ApprovalTTL time.Duration
	// GrantTTL is the life of a grant whose approver gave none. Default
	// 24h.
	GrantTTL time.Duration
	// ApprovalRetention is how long decided approval records and used
	// nonces are kept (per-key TTL in the approvals bucket), for the
	// audit. Default: the bus's CallsMaxAge (the calls' audit horizon).
	ApprovalRetention time.Duration
	// AgentVisibility is which calls of its tenant a key sees on GetResult,
	// GetOutput, Watch, Cancel and ApplyIntents (and the MCP endpoint and
	// toolctl, which use them): identity.VisibilityTenant (the default:
	// every call of the tenant) or identity.VisibilityOwn (an agent's own
	// calls; the admin and approve scopes see the whole tenant). A call
	// outside answers as a made-up id (identity.Identity.MaySeeCall).
	AgentVisibility identity.Visibility
	// ApprovalSweep is how often each replica expires the approvals past
	// their TTL and finishes decisions a stopped replica left unpublished
	// (internal/approvalflow). Default 2s.
	ApprovalSweep time.Duration
	// TokenKeys are the approval token keys shared by the dispatchers
	// (approvals.LoadKeys); with them, a caller holding the "confirm"
	// scope gets a signed token with CONFIRMATION_REQUIRED and may send
	// the call again with it. Nil = no tokens: none is issued, and a call
	// presenting one is refused.
	TokenKeys *approvals.Keys
	// WorkerKeys says which worker signing keys announcements over NATS
	// may enrol (internal/signing, Trust); nil enrols none (keys enrolled
	// already, and the in-process workers', still pass).
	WorkerKeys *signing.Trust
	// Name routes results to this replica (a subject token). It must be
	// unique among live replicas. Default: the host name (the pod name in
	// Kubernetes) plus a random suffix. Results survive a name change: any
	// replica finds a result by call id.
	Name string
	// MaxArgsBytes bounds the arguments when the tool does not. Default 256 KiB.
	MaxArgsBytes int64
	// MaxArgsDepth bounds nesting when the tool does not. Default 32.
	MaxArgsDepth int
	// MaxArgsValues bounds the object members and array elements, at any
	// depth, of a call's arguments in either form; admission refuses more
	// with VALIDATION before the schema sees them (the schema check costs
	// time and memory per value). The API also counts a request body's
	// members and elements by a scan that allocates nothing, before
	// decoding it (a google.protobuf.Struct costs about 600 bytes of
	// allocation per value), and refuses a body with more than
	// MaxArgsValues plus 64 with invalid_argument. Default 2048: the widest
	// arguments it admits, ten at once, are answered in well under 100ms
	// (docs/reliability.md, "Request limits").
	MaxArgsValues int
	// DefaultWait is how long Call waits when the request does not say.
	// Default 60s.
	DefaultWait time.Duration
	// MaxWait caps any wait a request asks for. Default 15m.
	MaxWait time.Duration
	// InputTTL is how long after a tool asked for input (an input-required
	// response) a call may continue it. Default 1h.
	InputTTL time.Duration
	// AcceptedRecordDelay is how long a call waited on in Call runs before
	// its admission record is written (a fast call's result is its
	// record; this saves a stored message per call). Default 50ms; -1 =
	// at once.
	AcceptedRecordDelay time.Duration
	// ConnHealth, when set, is told of each call publish that timed out or
	// found no stream (bus.Watchdog.Report), so that the connection's
	// watchdog probes its server at once rather than at its period. Nil:
	// nobody is told (the embedded server, a test).
	ConnHealth interface{ Report(err error) }
	// PublishHorizon bounds how long admission publishes a call again
	// (same message id) while the calls stream does not acknowledge it,
	// before it answers the caller: refused (OVERLOADED) when no publish
	// can have been stored, else accepted and unconfirmed (the
	// republisher goes on, unconfirmed.go). Default 15s: an election
	// after a leader's crash takes 4 to 9 s, and more under load.
	PublishHorizon time.Duration
	// MaxDelegationDepth bounds a delegation chain (CallRequest.
	// parent_call_id, docs/delegation.md): a call whose parent is already
	// this many calls below its root is refused. Default 8.
	MaxDelegationDepth int
	// MaxDelegationFanOut bounds the calls made on behalf of one parent
	// call (its children admitted or parked; refused ones do not count).
	// Default 256.
	MaxDelegationFanOut int
	// MaxDelegationDescendants bounds the calls of one delegation chain
	// (the calls made on behalf of its root, and theirs; refused ones do
	// not count), so that one Cancel of a root always reaches them all.
	// Default 1024, at most 4096 (the cascade's bound).
	MaxDelegationDescendants int
	// MaxWaiting bounds callers waiting in Call on this replica; past it
	// Call answers OVERLOADED. Default 100000.
	MaxWaiting int
	// MaxBacklog bounds each pool's backlog: its calls queued and running,
	// the pool consumer's NumPending + NumAckPending as this replica sees
	// it (read every LoadRefresh, plus what it admitted since). A call
	// for a pool at its bound is answered OVERLOADED with a retry_after,
	// and nothing is queued. Default 10000; -1 = no bound.
	MaxBacklog int
	// PoolMaxBacklog overrides MaxBacklog by pool name; -1 = no bound.
	PoolMaxBacklog map[string]int
	// MaxQueueWait bounds the expected queue wait of a call without a
	// schedule-to-start of its own, with the pool's service time: a call
	// its pool would start later than the larger of MaxQueueWait and
	// poolview.QueueWaitRounds (3) times the pool's typical call time is
	// answered OVERLOADED with a retry_after (poolview.LoadConfig). A
	// call's schedule-to-start replaces it. Default 2s (the queue a fast
	// pool works off once an overload ends: latency recovers in about
	// twice that at half the pool's capacity; a pool of 30s calls queues
	// 90s); negative = no bound, except for the pools in PoolMaxQueueWait.
	MaxQueueWait time.Duration
	// PoolMaxQueueWait is a pool's own bound on queue wait by pool name,
	// in place of MaxQueueWait and its scaling; at least 100ms, negative
	// = no bound.
	PoolMaxQueueWait map[string]time.Duration
	// LoadRefresh is how often the pool consumers' backlogs are read (one
	// consumer listing of the calls stream; the stores' use is read every
	// 2s, or every LoadRefresh when longer). Default 500ms.
	LoadRefresh time.Duration
	// StoreHighWater is the share of a store's byte limit past which
	// calls that would write it are answered OVERLOADED, so that the calls
	// already admitted still have room to finish; the capacity sampler's
	// time to full counts down to it for those stores. Default 0.9.
	StoreHighWater float64
	// OrphanSweep is how often the dispatcher looks for calls on a subject
	// that no pool consumer filters (a raw publish for an unknown type or
	// tool, or calls left behind by a deleted pool) and ends them: a dead
	// letter and a NOT_FOUND answer (internal/maintenance: Sweeper).
	// Default 1m; negative = never.
	OrphanSweep time.Duration
	// OrphanGrace is how old such a call must be before it is ended.
	// Default 1m.
	OrphanGrace time.Duration
	// Overdue is the overdue sweeper's timing (internal/maintenance:
	// OverdueSweeper, which answers an accepted call that has no result
	// past its schedule-to-close deadline); zero values are its defaults.
	Overdue maintenance.OverdueSettings
	// PoolCheck is how often admission's view of the pool consumers is
	// listed again: a call for a tool no pool consumer filters is refused
	// NOT_FOUND (poolview.Pools; a miss is looked up in a fresh listing
	// first, so a pool that just started is never missed). Default 10s;
	// negative = no check (such calls are queued, and the orphan sweeper
	// ends them).
	PoolCheck time.Duration
	// MaxRequestBytes bounds an API request body (after decompression),
	// applied while it is read: a longer body is refused with
	// resource_exhausted before it is decoded. Default MaxArgsBytes plus
	// 64 KiB (320 KiB), a little above the argument limit; a tool whose
	// spec allows larger arguments needs it raised.
	MaxRequestBytes int64
	// MaxRequestDepth bounds the nesting of objects and arrays in a
	// request body, the request's own object included, checked by the same
	// scan. Default twice MaxArgsDepth (64).
	MaxRequestDepth int
	// WatchGrace is how long Watch waits for the first record of a call
	// id minted in the last 10s that has none yet (its admission record may
	// still be on its way) before it answers ErrUnknownCall. Default 5s.
	WatchGrace time.Duration
	// MaxWatchesPerCaller bounds the concurrent Watches of one caller
	// (tenant and agent) on this replica; past it Watch answers
	// ErrTooManyWatches. Default 100; -1 = no cap.
	MaxWatchesPerCaller int
	// MaxWaitingPerCaller bounds the callers of one caller identity
	// (tenant and agent) waiting on this replica in Call or in GetResult
	// with a wait; past it they are answered ErrTooManyWaiting. Default
	// 10000; -1 = no cap.
	MaxWaitingPerCaller int
	// Logger; default slog.Default(). The dispatcher logs through a
	// telemetry.LogHandler: lines logged with a call's context carry its
	// trace_id and span_id.
	Logger *slog.Logger
	// TracerProvider makes the admission and publish spans; the call's
	// trace context travels to the worker in the message headers. Nil =
	// tracing off: no spans, no headers.
	TracerProvider trace.TracerProvider
	// Metrics are the instruments the dispatcher records into (create them
	// with telemetry.NewDispatcherMetrics on the registry /metrics
	// serves). Nil = a private, unregistered set.
	Metrics *telemetry.DispatcherMetrics
}

// WithDefaults returns a copy with zero fields set.
func (c Config) WithDefaults() Config {
	if c.Name == "" {
		host, _ := os.Hostname()
		var b [3]byte
		_, _ = rand.Read(b[:])
		c.Name = bus.Token(cmp.Or(host, "dispatcher")) + "-" + hex.EncodeToString(b[:])
	}
	c.MaxArgsBytes = cmp.Or(c.MaxArgsBytes, 256<<10)
	c.MaxArgsDepth = cmp.Or(c.MaxArgsDepth, 32)
	c.MaxArgsValues = cmp.Or(c.MaxArgsValues, 2048)
	c.DefaultWait = cmp.Or(c.DefaultWait, 60*time.Second)
	c.MaxWait = cmp.Or(c.MaxWait, 15*time.Minute)
	c.InputTTL = cmp.Or(c.InputTTL, time.Hour)
	c.MaxWaiting = cmp.Or(c.MaxWaiting, 100000)
	c.MaxDelegationDepth = cmp.Or(c.MaxDelegationDepth, 8)
	c.MaxDelegationFanOut = cmp.Or(c.MaxDelegationFanOut, 256)
	c.MaxDelegationDescendants = cmp.Or(c.MaxDelegationDescendants, 1024)
	c.MaxRequestBytes = cmp.Or(c.MaxRequestBytes, c.MaxArgsBytes+64<<10)
	c.MaxRequestDepth = cmp.Or(c.MaxRequestDepth, 2*c.MaxArgsDepth)
	c.WatchGrace = cmp.Or(c.WatchGrace, 5*time.Second)
	c.MaxWatchesPerCaller = cmp.Or(c.MaxWatchesPerCaller, 100)
	c.MaxWaitingPerCaller = cmp.Or(c.MaxWaitingPerCaller, 10000)
	c.AcceptedRecordDelay = cmp.Or(c.AcceptedRecordDelay, 50*time.Millisecond)
	c.PublishHorizon = cmp.Or(c.PublishHorizon, 15*time.Second)
	if c.AcceptedRecordDelay < 0 {
		c.AcceptedRecordDelay = 0
	}
	c.MaxBacklog = cmp.Or(c.MaxBacklog, 10000)
	c.LoadRefresh = cmp.Or(c.LoadRefresh, 500*time.Millisecond)
	c.MaxQueueWait = cmp.Or(c.MaxQueueWait, poolview.DefaultMaxQueueWait)
	c.StoreHighWater = cmp.Or(c.StoreHighWater, 0.9)
	c.OrphanSweep = cmp.Or(c.OrphanSweep, time.Minute)
	c.OrphanGrace = cmp.Or(c.OrphanGrace, time.Minute)
	c.PoolCheck = cmp.Or(c.PoolCheck, 10*time.Second)
	c.ApprovalTTL = cmp.Or(c.ApprovalTTL, approvalflow.DefaultTTL)
	c.GrantTTL = cmp.Or(c.GrantTTL, approvalflow.DefaultGrantTTL)
	c.ApprovalSweep = cmp.Or(c.ApprovalSweep, approvalflow.DefaultSweep)
	c.AgentVisibility = cmp.Or(c.AgentVisibility, identity.VisibilityTenant)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate names the first invalid field.
func (c Config) Validate() error {
	switch {
	case bus.Token(c.Name) != c.Name:
		return fmt.Errorf("dispatch: Name %q is not a subject token", c.Name)
	case c.MaxArgsBytes < 2:
		return fmt.Errorf("dispatch: MaxArgsBytes %d is too small", c.MaxArgsBytes)
	case c.MaxArgsDepth < 1:
		return fmt.Errorf("dispatch: MaxArgsDepth %d must be positive", c.MaxArgsDepth)
	case c.DefaultWait > c.MaxWait:
		return errors.New("dispatch: DefaultWait exceeds MaxWait")
	case c.OrphanGrace < 0:
		return fmt.Errorf("dispatch: OrphanGrace %s must not be negative", c.OrphanGrace)
	case c.PublishHorizon < 0:
		return fmt.Errorf("dispatch: PublishHorizon %s must not be negative", c.PublishHorizon)
	case c.MaxRequestBytes < 1<<10 || c.MaxRequestBytes > math.MaxInt32:
		return fmt.Errorf("dispatch: MaxRequestBytes %d must be between 1 KiB and 2 GiB", c.MaxRequestBytes)
	case c.MaxArgsValues < 1:
		return fmt.Errorf("dispatch: MaxArgsValues %d must be positive", c.MaxArgsValues)
	case c.MaxRequestDepth < 2:
		return fmt.Errorf("dispatch: MaxRequestDepth %d must be at least 2", c.MaxRequestDepth)
	case c.WatchGrace < 0:
		return fmt.Errorf("dispatch: WatchGrace %s must not be negative", c.WatchGrace)
	case c.MaxWatchesPerCaller < -1:
		return fmt.Errorf("dispatch: MaxWatchesPerCaller %d must be positive or -1", c.MaxWatchesPerCaller)
	case c.AgentVisibility.Validate() != nil:
		return fmt.Errorf("dispatch: AgentVisibility: %w", c.AgentVisibility.Validate())
	case c.MaxWaitingPerCaller < -1:
		return fmt.Errorf("dispatch: MaxWaitingPerCaller %d must be positive or -1", c.MaxWaitingPerCaller)
	case c.MaxBacklog < -1:
		return fmt.Errorf("dispatch: MaxBacklog %d must be positive or -1", c.MaxBacklog)
	case c.MaxQueueWait > 0 && c.MaxQueueWait < 100*time.Millisecond:
		return fmt.Errorf("dispatch: MaxQueueWait %s is below 100ms (negative = no bound)", c.MaxQueueWait)
	case c.LoadRefresh < 10*time.Millisecond:
		return fmt.Errorf("dispatch: LoadRefresh %s is below 10ms", c.LoadRefresh)
	case c.StoreHighWater <= 0 || c.StoreHighWater > 1:
		return fmt.Errorf("dispatch: StoreHighWater %g must be above 0 and at most 1", c.StoreHighWater)
	case c.InputTTL < 0:
		return fmt.Errorf("dispatch: InputTTL %s is negative", c.InputTTL)
	case c.ApprovalTTL < time.Second:
		return fmt.Errorf("dispatch: ApprovalTTL %s is below 1s", c.ApprovalTTL)
	case c.GrantTTL < time.Second:
		return fmt.Errorf("dispatch: GrantTTL %s is below 1s", c.GrantTTL)
	case c.ApprovalRetention < 0:
		return fmt.Errorf("dispatch: ApprovalRetention %s must not be negative", c.ApprovalRetention)
	case c.ApprovalSweep < 10*time.Millisecond:
		return fmt.Errorf("dispatch: ApprovalSweep %s is below 10ms", c.ApprovalSweep)
	case c.MaxDelegationDepth < 1 || c.MaxDelegationDepth > maxDelegationDepth:
		return fmt.Errorf("dispatch: MaxDelegationDepth %d must be between 1 and %d", c.MaxDelegationDepth, maxDelegationDepth)
	case c.MaxDelegationFanOut < 1 || c.MaxDelegationFanOut > maxDelegationFanOut:
		return fmt.Errorf("dispatch: MaxDelegationFanOut %d must be between 1 and %d", c.MaxDelegationFanOut, maxDelegationFanOut)
	case c.MaxDelegationDescendants < 1 || c.MaxDelegationDescendants > maxCascade:
		return fmt.Errorf("dispatch: MaxDelegationDescendants %d must be between 1 and %d", c.MaxDelegationDescendants, maxCascade)
	}
	for pool, n := range c.PoolMaxBacklog {
		if n == 0 || n < -1 {
			return fmt.Errorf("dispatch: PoolMaxBacklog[%s] %d must be positive or -1", pool, n)
		}
	}
	for pool, d := range c.PoolMaxQueueWait {
		if d >= 0 && d < 100*time.Millisecond {
			return fmt.Errorf("dispatch: PoolMaxQueueWait[%s] %s is below 100ms (negative = no bound)", pool, d)
		}
	}
	return nil
}
