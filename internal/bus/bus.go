package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Bus is a connection with the layout of one installation in place.
type Bus struct {
	Config   Config
	Subjects Subjects
	NC       *nats.Conn
	JS       jetstream.JetStream
	// Signer signs what this process writes into the record (Options.Signer).
	Signer *signing.Key
	// Keys decides whose signatures are believed (the enrolments in the
	// registry bucket): internal/believed reads results through it.
	Keys *signing.Keyring

	Calls   jetstream.Stream
	Results jetstream.Stream
	Events  jetstream.Stream
	DLQ     jetstream.Stream
	// Retries holds calls waiting out a long retry delay as message
	// schedules, so that they hold no pool consumer slot.
	Retries jetstream.Stream
	// Advisories captures the server's MaxDeliver advisories for the calls
	// stream: advisories are core messages, lost when nobody listens.
	Advisories jetstream.Stream
	Cancels    jetstream.KeyValue
	// Idempotency maps tenant-scoped idempotency keys to call ids for the
	// audit horizon, beyond the stream's duplicate window.
	Idempotency jetstream.KeyValue
	Registry    jetstream.KeyValue
	// Sessions holds the reference intent applier's session states.
	Sessions jetstream.KeyValue
	// Policies holds the policy documents (by content hash) and which one
	// is in force per tenant, with its history (internal/policystore).
	Policies jetstream.KeyValue
	// Approvals holds parked calls awaiting approval, approval records,
	// used nonces and grants (internal/approvals); keys carry their own
	// TTLs.
	Approvals jetstream.KeyValue
	// Limits holds the counts of rate limits, concurrency slots, budgets
	// and the loop guard (internal/limits); keys carry their own TTLs.
	Limits jetstream.KeyValue
	// Tasks holds the MCP endpoint's tasks: the call a task is at, and the
	// answers it was given (internal/mcpserver); kept TasksTTL after the
	// last change.
	Tasks jetstream.KeyValue
	// Revocations holds the dashboard's sign-out records: one key per API
	// key that signed out (internal/dashboard), each with a per-key TTL,
	// and RevocationsMaxAge as a backstop. Only dispatchers open it: nil
	// with Options.Bind (workers never use it).
	Revocations jetstream.KeyValue
	// Delegation holds the counters of the delegation chains (a parent's
	// children, a root's descendants: Config.DelegationStream), a counter
	// stream that admission adds to (AddToCounter). Only dispatchers open
	// it: nil with Options.Bind.
	Delegation jetstream.Stream
	Blobs      jetstream.ObjectStore

	bind bool // Options.Bind
	log  *slog.Logger
	// pauseHook, set by tests only (export_test.go), runs after each step
	// of a pause or resume (poolpause.go, pauseStep).
	pauseHook func(ctx context.Context, step string)
}

// Options tune the JetStream context of a Bus.
type Options struct {
	// MaxPendingPublishes bounds async publishes awaiting an ack (each
	// admitted call makes two). Default 65536.
	MaxPendingPublishes int
	// Bind makes Open attach to the layout as it is instead of creating or
	// updating it: each stream and bucket is looked up, and only one that
	// does not exist yet is created. Workers bind: their credentials
	// (RoleWorker) may look streams up but not manage them, and a
	// worker's defaults must not rewrite the limits a dispatcher set.
	Bind bool
	// Logger receives the settings Open and EnsurePool put back (see
	// drift.go). Default slog.Default().
	Logger *slog.Logger
	// Signer is the key the process signs what it writes into the record
	// with (results, events: internal/signing). Default a new key, kept
	// in memory: a process whose key nobody enrolled writes nothing the
	// dispatchers believe, except through an in-process Registrar.
	Signer *signing.Key
}

// PublishAsyncTimeout is how long an asynchronous publish (the
// dispatcher's call publish) waits for its ack before it fails and is
// published again. A stream whose leader went silent (a frozen or
// partitioned node: its connections stay open) answers nothing until the
// others elect a new leader (4 to 9 s); a publish sent just before the
// election waits out this timeout, so admission resumes up to this long
// after the election (5 s before: a frozen calls leader stalled admission
// 10 s and refused calls). An ack slower than this, on a healthy but
// overloaded server, costs a second publish the duplicate window drops.
const PublishAsyncTimeout = 2 * time.Second

// Open creates or updates every stream and bucket of cfg on nc and returns
// the Bus. It is idempotent and safe to run from every replica at once.
// The caller keeps ownership of nc.
func Open(ctx context.Context, nc *nats.Conn, cfg Config, opts Options) (*Bus, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Async publishes time out, so that every future resolves.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(cmp.Or(opts.MaxPendingPublishes, 65536)),
		jetstream.WithPublishAsyncTimeout(PublishAsyncTimeout))
	if err != nil {
		return nil, fmt.Errorf("bus: jetstream: %w", err)
	}
	signer := opts.Signer
	if signer == nil {
		if signer, err = signing.NewKey(); err != nil {
			return nil, err
		}
	}
	b := &Bus{Config: cfg, Subjects: cfg.Subjects(), NC: nc, JS: js, Signer: signer, bind: opts.Bind, log: cmp.Or(opts.Logger, slog.Default())}
	if err := b.ensure(ctx); err != nil {
		return nil, err
	}
	b.Keys = NewKeyring(b.Registry, nc, cfg.RegistryBucket())
	b.Keys.EventsWith(EventsReader(nc, b.Events, b.Subjects))
	return b, nil
}

// EventsReader reads a call's events from the leader of events (the
// EVENTS stream) for a keyring's claim check (signing.EventsReader): a
// replica that lags would not show a claim the leader acknowledged. It
// reads the events on every dispatcher's subject of the call (a result
// stored under another dispatcher's token is the same call's), each
// subject oldest first, one leader get per event on the literal subject:
// a get on the wildcard would have the server walk the stream's blocks
// between the call's events, and to its end, once the stream holds more
// than 64K subjects. A subject that is not a result's is an error. Nil
// (no claim check) without a connection or a stream.
func EventsReader(nc *nats.Conn, events jetstream.Stream, s Subjects) signing.EventsReader {
	if nc == nil || events == nil {
		return nil
	}
	return func(ctx context.Context, result string, limit int, each func(*jetstream.RawStreamMsg) bool) (bool, error) {
		filter, ok := s.EventsOfResult(result)
		if !ok {
			return false, fmt.Errorf("bus: %q is not a result subject", result)
		}
		subjects, err := literalSubjects(ctx, nc, events, filter, true)
		if err != nil {
			return false, err
		}
		slices.Sort(subjects)
		name, n := events.CachedInfo().Config.Name, 0
		for _, subject := range subjects {
			for seq := uint64(1); ; n++ {
				if n == limit {
					return false, nil
				}
				m, err := leaderGet(ctx, nc, name, subject, getRequest{Seq: seq, NextFor: subject})
				if errors.Is(err, jetstream.ErrMsgNotFound) {
					break
				}
				if err != nil {
					return false, err
				}
				if !each(m) {
					n++
					break
				}
				seq = m.Sequence + 1
			}
		}
		return true, nil
	}
}

// NewKeyring is a signing.Keyring over the registry bucket kv whose
// direct gets ride out an election (LeaderRetry: no replica answering
// now is not a failed check) and, with nc, confirm a key found missing
// with the bucket stream's leader (KVGetFromLeader; bucket is kv's name).
func NewKeyring(kv jetstream.KeyValue, nc *nats.Conn, bucket string) *signing.Keyring {
	k := signing.NewKeyring(kv)
	k.RetryWith(func(ctx context.Context, read func(context.Context) error) error {
		return LeaderRetry(ctx, leaderAttempt, func(ctx context.Context) error { // deniedOr and lastError take a nil nc
			before := lastError(nc)
			return deniedOr(nc, before, jsAPI+"DIRECT.GET."+kvStream(bucket), read(ctx))
		})
	})
	if nc != nil {
		k.ConfirmWith(func(ctx context.Context, key string) ([]byte, error) {
			e, err := KVGetFromLeader(ctx, nc, bucket, key)
			if err != nil {
				return nil, err
			}
			return e.Value, nil
		})
	}
	return k
}

func (b *Bus) ensure(ctx context.Context) error {
	c, s := b.Config, b.Subjects
	streams := []struct {
		dst *jetstream.Stream
		cfg jetstream.StreamConfig
	}{
		{&b.Calls, jetstream.StreamConfig{
			Name:        c.CallsStream(),
			Description: "toolwire calls: the audit log of every admitted call",
			Subjects:    []string{s.AllCalls(), s.AllShadow()},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      c.CallsWindow(),
			MaxBytes:    c.CallsMaxBytes,
			Discard:     jetstream.DiscardNew,
			Duplicates:  c.DuplicateWindow,
			Storage:     jetstream.FileStorage,
			Replicas:    c.Replicas,
			AllowDirect: true,
			DenyPurge:   true,
			DenyDelete:  true,
		}},
		{&b.Results, jetstream.StreamConfig{
			Name:        c.ResultsStream(),
			Description: "toolwire results: one terminal response per call",
			Subjects:    []string{s.AllResults()},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      c.ResultsWindow(),
			MaxBytes:    c.ResultsMaxBytes,
			Discard:     jetstream.DiscardOld,
			Duplicates:  min(2*time.Minute, c.ResultsWindow()), // a window may not exceed MaxAge (tests keep seconds)
			Storage:     jetstream.FileStorage,
			Replicas:    c.Replicas,
			AllowDirect: true,
			DenyPurge:   true,
		}},
		{&b.Events, jetstream.StreamConfig{
			Name:        c.EventsStream(),
			Description: "toolwire call events: lifecycle and progress",
			Subjects:    []string{s.AllEvents()},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      c.EventsWindow(),
			MaxBytes:    c.EventsMaxBytes,
			Discard:     jetstream.DiscardOld,
			Storage:     jetstream.FileStorage,
			Replicas:    c.Replicas,
			AllowDirect: true,
		}},
		{&b.DLQ, jetstream.StreamConfig{
			Name:        c.DLQStream(),
			Description: "toolwire dead letters: exhausted and terminated calls",
			Subjects:    []string{s.AllDLQ()},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      c.DLQMaxAge,
			MaxBytes:    c.DLQMaxBytes,
			Discard:     jetstream.DiscardOld,
			Storage:     jetstream.FileStorage,
			Replicas:    c.Replicas,
			AllowDirect: true,
		}},
	}
	streams = append(streams, struct {
		dst *jetstream.Stream
		cfg jetstream.StreamConfig
	}{&b.Retries, jetstream.StreamConfig{
		// Message schedules need discard-old and a target in the same
		// stream (nats-server refuses them on the discard-new CALLS stream
		// and across streams), so due retries land here and the
		// dispatchers' mover puts them back on CALLS.
		Name:              c.RetriesStream(),
		Description:       "toolwire: calls waiting out a long retry delay",
		Subjects:          []string{s.AllRetries()},
		Retention:         jetstream.LimitsPolicy,
		MaxAge:            c.CallsMaxAge,
		MaxBytes:          c.RetriesMaxBytes,
		Discard:           jetstream.DiscardOld,
		Storage:           jetstream.FileStorage,
		Replicas:          c.Replicas,
		AllowMsgSchedules: true,
	}}, struct {
		dst *jetstream.Stream
		cfg jetstream.StreamConfig
	}{&b.Advisories, jetstream.StreamConfig{
		Name:        c.AdvisoriesStream(),
		Description: "toolwire: MaxDeliver advisories of the calls stream, for dead-lettering",
		Subjects:    []string{MaxDeliverAdvisories(c.CallsStream())},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      advisoriesMaxAge,
		MaxBytes:    c.AdvisoriesMaxBytes,
		Discard:     jetstream.DiscardOld,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
	}})
	for _, st := range streams {
		stream, err := b.stream(ctx, st.cfg)
		if err != nil {
			return fmt.Errorf("bus: stream %s: %w", st.cfg.Name, err)
		}
		if got := stream.CachedInfo().Config.Retention; got != st.cfg.Retention {
			return fmt.Errorf("bus: stream %s has retention %s, want %s", st.cfg.Name, got, st.cfg.Retention)
		}
		*st.dst = stream
	}
	var err error
	b.Cancels, err = b.keyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         c.CancelBucket(),
		Description:    "toolwire cancel tombstones",
		TTL:            c.CancelTTL,
		MaxBytes:       c.CancelsMaxBytes,
		LimitMarkerTTL: time.Minute,
		Storage:        jetstream.FileStorage,
		Replicas:       c.Replicas,
	})
	if err != nil {
		return fmt.Errorf("bus: kv %s: %w", c.CancelBucket(), err)
	}
	b.Idempotency, err = b.keyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      c.IdempotencyBucket(),
		Description: "toolwire idempotency keys",
		TTL:         c.IdempotencyTTL,
		MaxBytes:    c.IdempotencyMaxBytes,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
	})
	if err != nil {
		return fmt.Errorf("bus: kv %s: %w", c.IdempotencyBucket(), err)
	}
	b.Registry, err = b.keyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      c.RegistryBucket(),
		Description: "toolwire tool registry",
		History:     uint8(c.RegistryHistory),
		MaxBytes:    c.RegistryMaxBytes,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
	})
	if err != nil {
		return fmt.Errorf("bus: kv %s: %w", c.RegistryBucket(), err)
	}
	b.Sessions, err = b.keyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      c.SessionsBucket(),
		Description: "toolwire session states (reference intent applier)",
		TTL:         c.CallsMaxAge,
		MaxBytes:    c.SessionsMaxBytes,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
	})
	if err != nil {
		return fmt.Errorf("bus: kv %s: %w", c.SessionsBucket(), err)
	}
	b.Policies, err = b.keyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      c.PoliciesBucket(),
		Description: "toolwire policy documents",
		History:     64,
		MaxBytes:    c.PoliciesMaxBytes,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
	})
	if err != nil {
		return fmt.Errorf("bus: kv %s: %w", c.PoliciesBucket(), err)
	}
	b.Approvals, err = b.keyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         c.ApprovalsBucket(),
		Description:    "toolwire approvals and grants",
		MaxBytes:       c.ApprovalsMaxBytes,
		LimitMarkerTTL: time.Minute,
		Storage:        jetstream.FileStorage,
		Replicas:       c.Replicas,
	})
	if err != nil {
		return fmt.Errorf("bus: kv %s: %w", c.ApprovalsBucket(), err)
	}
	b.Limits, err = b.keyValue(ctx, LimitsKeyValueConfig(c.LimitsBucket(), c.Replicas, c.LimitsMaxBytes))
	if err != nil {
		return fmt.Errorf("bus: kv %s: %w", c.LimitsBucket(), err)
	}
	b.Tasks, err = b.keyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      c.TasksBucket(),
		Description: "toolwire MCP tasks: the call each is at and the answers it was given",
		History:     1,
		TTL:         TasksTTL,
		MaxBytes:    c.TasksMaxBytes,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
	})
	if err != nil {
		return fmt.Errorf("bus: kv %s: %w", c.TasksBucket(), err)
	}
	// Blobs before revocations and delegation: a store added in a
	// release comes after the limits of the stores that were there before
	// are applied, so that what an existing store gives up (blobs 288 →
	// 280 MiB for revocations, 280 → 248 MiB for delegation) is free for
	// it on a server whose max_file_store is exactly the reservation.
	b.Blobs, err = b.objectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      c.BlobBucket(),
		Description: "toolwire outputs over the inline limit",
		TTL:         c.ResultsMaxAge,
		MaxBytes:    c.BlobsMaxBytes,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
	})
	if err != nil {
		return fmt.Errorf("bus: object store %s: %w", c.BlobBucket(), err)
	}
	if b.bind {
		return nil // workers never read the sign-outs nor the delegation counters (RoleWorker has no grant on them)
	}
	b.Revocations, err = b.keyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         c.RevocationsBucket(),
		Description:    "toolwire dashboard sign-outs: per API key, when its sessions were last ended",
		History:        1,
		TTL:            RevocationsMaxAge,
		MaxBytes:       c.RevocationsMaxBytes,
		LimitMarkerTTL: time.Minute,
		Storage:        jetstream.FileStorage,
		Replicas:       c.Replicas,
	})
	if err != nil {
		return fmt.Errorf("bus: kv %s: %w", c.RevocationsBucket(), err)
	}
	b.Delegation, err = b.stream(ctx, delegationStream(c, s))
	if err != nil {
		return fmt.Errorf("bus: stream %s: %w", c.DelegationStream(), err)
	}
	return nil
}

// delegationStream is the counter stream of the delegation chains
// (Config.DelegationStream). A counter stream takes neither per-message
// TTLs nor discard-new, and the setting cannot be turned on for an
// existing stream: hence a stream of its own, whose counters expire
// whole, CancelTTL after their last change (the lifetime of the keys they
// count), and which, full, drops the counter changed longest ago.
func delegationStream(c Config, s Subjects) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              c.DelegationStream(),
		Description:       "toolwire delegation chains: per parent call its children, per root call its chain's calls (counters)",
		Subjects:          []string{s.AllDelegation()},
		Retention:         jetstream.LimitsPolicy,
		MaxAge:            c.CancelTTL,
		MaxBytes:          c.DelegationMaxBytes,
		MaxMsgsPerSubject: 1,
		Discard:           jetstream.DiscardOld,
		Storage:           jetstream.FileStorage,
		Replicas:          c.Replicas,
		AllowMsgCounter:   true,
	}
}

// stream creates or updates the stream of cfg, or with bind looks it up
// and creates it only if it does not exist.
func (b *Bus) stream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	if b.bind {
		st, err := b.JS.Stream(ctx, cfg.Name)
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return st, err
		}
		st, err = b.JS.CreateStream(ctx, cfg)
		return st, missing(b.Config.storeFullHint(err))
	}
	live := b.liveStream(ctx, cfg.Name)
	cfg = keepArchiveHold(cfg, live, time.Now())
	if b.Config.archived(cfg.Name) {
		cfg = keepLongerMaxAge(ctx, b.log, cfg, live)
	}
	st, err := b.JS.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		return nil, b.Config.storeFullHint(err)
	}
	b.logDrift(ctx, "stream", cfg.Name, live, st.CachedInfo().Config)
	return st, nil
}

// keyValue is stream for a KV bucket.
func (b *Bus) keyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	if b.bind {
		kv, err := b.JS.KeyValue(ctx, cfg.Bucket)
		if !errors.Is(err, jetstream.ErrBucketNotFound) {
			return kv, err
		}
		kv, err = b.JS.CreateKeyValue(ctx, cfg)
		return kv, missing(b.Config.storeFullHint(err))
	}
	name := "KV_" + cfg.Bucket
	live := b.liveStream(ctx, name)
	kv, err := b.JS.CreateOrUpdateKeyValue(ctx, cfg)
	if err != nil {
		return nil, b.Config.storeFullHint(err)
	}
	b.logDrift(ctx, "stream", name, live, b.liveStream(ctx, name))
	return kv, nil
}

// objectStore is stream for an Object Store bucket.
func (b *Bus) objectStore(ctx context.Context, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	if b.bind {
		obj, err := b.JS.ObjectStore(ctx, cfg.Bucket)
		if !errors.Is(err, jetstream.ErrBucketNotFound) {
			return obj, err
		}
		obj, err = b.JS.CreateObjectStore(ctx, cfg)
		return obj, missing(b.Config.storeFullHint(err))
	}
	name := "OBJ_" + cfg.Bucket
	live := b.liveStream(ctx, name)
	obj, err := b.JS.CreateOrUpdateObjectStore(ctx, cfg)
	if err != nil {
		return nil, b.Config.storeFullHint(err)
	}
	b.logDrift(ctx, "stream", name, live, b.liveStream(ctx, name))
	return obj, nil
}

// missing explains the failure to create a part of the layout that a
// binding client found missing.
func missing(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("not found, and creating it failed (a dispatcher creates the layout: start one first, or use credentials that may create streams): %w", err)
}

// PoolConfig describes the durable consumer shared by every replica of a
// worker pool.
type PoolConfig struct {
	// Name of the pool; default the type's token (native, mcp, ...).
	Name string
	// Type of executor the pool runs.
	Type toolwirev1.ExecutorType
	// Subjects the pool consumes: one per tool it serves (ToolSubject).
	// Empty = every call of Type.
	Subjects []string
	// AckWait before an unacknowledged call is redelivered; workers
	// heartbeat every AckWait/3. Default 30s.
	AckWait time.Duration
	// MaxDeliver bounds deliveries of one call. Default 5; -1 = unbounded.
	MaxDeliver int
	// MaxAckPending bounds calls delivered and not yet acknowledged across
	// the pool: size it to replicas × concurrency. Default 1024.
	MaxAckPending int
	// Shadow makes it a shadow pool: it consumes the shadow subjects that
	// replays publish to (ShadowToolSubject), never live calls.
	Shadow bool
}

// WithDefaults fills zero fields.
func (p PoolConfig) WithDefaults() PoolConfig {
	p.Name = cmp.Or(p.Name, TypeToken(p.Type))
	p.AckWait = cmp.Or(p.AckWait, 30*time.Second)
	p.MaxDeliver = cmp.Or(p.MaxDeliver, 5)
	p.MaxAckPending = cmp.Or(p.MaxAckPending, 1024)
	return p
}

// Validate names the first invalid field.
func (p PoolConfig) Validate() error {
	if _, ok := ParseType(TypeToken(p.Type)); !ok {
		return fmt.Errorf("bus: pool %q: Type %s is not an executor type", p.Name, p.Type)
	}
	if Token(p.Name) != p.Name {
		return fmt.Errorf("bus: pool %q: Name is not a subject token", p.Name)
	}
	if err := CheckPoolName(p.Name, p.Type); err != nil {
		return err
	}
	if p.AckWait < time.Second {
		return fmt.Errorf("bus: pool %q: AckWait %s is below 1s", p.Name, p.AckWait)
	}
	if p.MaxDeliver == 0 || p.MaxDeliver < -1 {
		return fmt.Errorf("bus: pool %q: MaxDeliver %d must be positive or -1", p.Name, p.MaxDeliver)
	}
	if p.MaxAckPending < 1 {
		return fmt.Errorf("bus: pool %q: MaxAckPending %d must be positive", p.Name, p.MaxAckPending)
	}
	return nil
}

// ToolSubject is the filter subject of one tool's calls, any tenant.
func (s Subjects) ToolSubject(t toolwirev1.ExecutorType, provider, tool string) string {
	return s.join("call", TypeToken(t), "*", Token(provider), Token(tool))
}

// ShadowToolSubject filters the replays of one tool, for shadow pools.
func (s Subjects) ShadowToolSubject(t toolwirev1.ExecutorType, provider, tool string) string {
	return s.join("shadow", TypeToken(t), "*", Token(provider), Token(tool))
}

// ErrPoolOverlap is returned when a pool would consume calls another pool
// already consumes: both would run every such call.
var ErrPoolOverlap = errors.New("bus: pools overlap")

// ErrPoolKind is returned when a pool's consumer would filter both live
// calls and replays: a pool is live or shadow, never both (its live
// workers would run replays, its shadow workers live calls).
var ErrPoolKind = errors.New("bus: a pool is live or shadow, never both")

// IsShadowFilter reports whether a consumer filter is over replays (the
// shadow subjects) rather than live calls.
func (s Subjects) IsShadowFilter(f string) bool {
	return strings.HasPrefix(f, strings.TrimSuffix(s.AllShadow(), ">"))
}

// hasLiveFilter reports whether a consumer filters live calls.
func (b *Bus) hasLiveFilter(c jetstream.ConsumerConfig) bool {
	return slices.ContainsFunc(ConsumerFilters(c), func(f string) bool { return !b.Subjects.IsShadowFilter(f) })
}

// EnsurePool creates or updates the pool's durable pull consumer. An
// existing consumer keeps the subjects it has and gains p's: replicas of a
// pool in a rolling upgrade may serve different tool sets, and a subject
// is never dropped under a replica that serves it (an operator removes
// retired tools). It refuses, with ErrPoolOverlap, subjects another pool
// already consumes; consumers that are not pools' (IsPoolConsumer: an
// audit's or a replay's ordered consumer, still there until its inactivity
// threshold when its process died) are ignored. An existing consumer of
// the other kind (live for a shadow p, shadow only for a live one) is
// refused with ErrPoolKind, its filters unchanged; a live p on a consumer
// that filters live calls and replays (one an earlier version let a
// shadow worker of the pool's name join) drops the replay filters, logged
// at WARN: a live pool never runs replays. The consumer's metadata
// carries the stamp of the settings it declares (PoolStampKey, PoolByKey:
// poolstamp.go), by which CheckPool tells another replica's declaration
// from a hand edit. A pause recorded with the consumer (PausePool) is
// kept, and applied again when a hand resumed it; a pause without a
// record is removed (poolpause.go).
func (b *Bus) EnsurePool(ctx context.Context, p PoolConfig) (jetstream.Consumer, error) {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	name := b.Config.PoolConsumer(p.Name)
	want := p.Subjects
	if len(want) == 0 {
		want = []string{b.Subjects.CallsOfType(p.Type)}
		if p.Shadow {
			want = []string{b.Subjects.ShadowOfType(p.Type)}
		}
	}
	subjects := map[string]bool{}
	for _, s := range want {
		subjects[s] = true
	}
	var live *jetstream.ConsumerConfig // what the server has, to log what the update puts back
	var overlap error
	// The lister is read to its end: its goroutine blocks on a send for
	// ever when left with consumers to hand over.
	lister := b.Calls.ListConsumers(ctx)
	for ci := range lister.Info() {
		if ci.Name == name {
			live = &ci.Config
		}
		if !b.Config.IsPoolConsumer(ci) || overlap != nil {
			continue // an audit's, a replay's: it runs no call
		}
		for _, f := range ConsumerFilters(ci.Config) {
			if ci.Name == name {
				switch shadow := b.Subjects.IsShadowFilter(f); {
				case shadow && !p.Shadow && b.hasLiveFilter(ci.Config):
					// A live pool's consumer that an earlier version let a
					// shadow worker of the same name join: its live workers
					// would run replays. Dropped, not refused, so that the
					// pool starts after the upgrade.
					b.log.Warn("removing a replay filter from a live pool's consumer: a pool is live or shadow, never both", "consumer", name, "filter", f)
				case shadow != p.Shadow:
					overlap = fmt.Errorf("%w: consumer %s of pool %s filters %s", ErrPoolKind, name, p.Name, f)
				default:
					subjects[f] = true
				}
				continue
			}
			for _, s := range want {
				if overlap == nil && subjectsOverlap(f, s) {
					overlap = fmt.Errorf("%w: %s of pool %s is already consumed by %s (filter %s)", ErrPoolOverlap, s, p.Name, ci.Name, f)
				}
			}
		}
	}
	if overlap != nil {
		return nil, overlap
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("bus: list consumers: %w", err)
	}
	filters := make([]string, 0, len(subjects))
	for s := range subjects {
		filters = append(filters, s)
	}
	slices.Sort(filters)
	cfg := jetstream.ConsumerConfig{
		Durable:       name,
		Description:   "toolwire worker pool " + p.Name,
		DeliverPolicy: jetstream.DeliverNewPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       p.AckWait,
		MaxDeliver:    p.MaxDeliver,
		MaxAckPending: p.MaxAckPending,
		MaxWaiting:    512,
	}
	// One filter goes in FilterSubject: the server serves a FilterSubjects
	// list, even of one, through its slower multi-filter path (about 1 µs
	// more per delivered call).
	if len(filters) == 1 {
		cfg.FilterSubject = filters[0]
	} else {
		cfg.FilterSubjects = filters
	}
	keepPause(&cfg, b.liveConfig(ctx, name, live)) // a recorded pause outlives a declaration (poolpause.go)
	stampPool(&cfg)
	cons, err := b.Calls.CreateOrUpdateConsumer(ctx, cfg)
	if err == nil {
		cons, err = b.restampPool(ctx, cons)
	}
	if err == nil {
		cons, err = b.matchPause(ctx, cons)
	}
	if err != nil {
		return nil, fmt.Errorf("bus: consumer %s: %w", name, err)
	}
	if got := cons.CachedInfo().Config.DeliverPolicy; got != jetstream.DeliverNewPolicy {
		return nil, fmt.Errorf("bus: consumer %s has deliver policy %s, want new", name, got)
	}
	if live != nil { // filters only ever grow, by design: not a difference
		after := cons.CachedInfo().Config
		before := *live
		before.FilterSubject, before.FilterSubjects, after.FilterSubject, after.FilterSubjects = "", nil, "", nil
		b.logDrift(ctx, "consumer", name, &before, &after)
	}
	return cons, nil
}

// restampPool stamps what the server holds when it differs from what
// EnsurePool sent (a server that fills a setting the declaration left
// out), so that the stamp always matches the live settings (CheckPool).
func (b *Bus) restampPool(ctx context.Context, cons jetstream.Consumer) (jetstream.Consumer, error) {
	got := cons.CachedInfo().Config
	if got.Metadata[PoolStampKey] == PoolStamp(got) {
		return cons, nil
	}
	got.Metadata = ownMetadata(got.Metadata)
	stampPool(&got)
	return b.Calls.UpdateConsumer(ctx, got)
}

// subjectsOverlap reports whether some subject matches both filters.
func subjectsOverlap(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(at) && i < len(bt); i++ {
		x, y := at[i], bt[i]
		if x == ">" || y == ">" {
			return true
		}
		if x != "*" && y != "*" && x != y {
			return false
		}
	}
	return len(at) == len(bt)
}

// IsWrongLastSequence reports whether err is the server refusing a publish
// whose expected last sequence did not hold (a result already exists).
func IsWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
	}
	return false
}

// IsCASConflict reports whether err is a key-value compare-and-set that
// lost: the key exists (Create), or its revision moved (Update), on a
// single server or a replicated bucket.
func IsCASConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) || IsWrongLastSequence(err)
}

// MaxDeliverAdvisories is the subject of the server's MaxDeliver advisories
// for every consumer of stream.
func MaxDeliverAdvisories(stream string) string {
	return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + stream + ".*"
}

// ConsumerFilters returns a consumer's filter subjects, whether it has one
// (FilterSubject) or several (FilterSubjects).
func ConsumerFilters(cfg jetstream.ConsumerConfig) []string {
	if cfg.FilterSubject != "" {
		return append([]string{cfg.FilterSubject}, cfg.FilterSubjects...)
	}
	return cfg.FilterSubjects
}

// LimitsValueBytes bounds one value of the limits bucket: the largest the
// limits store writes (a concurrency key at its most holders,
// limits.MaxValueBytes) plus room for a write's headers, which the server
// counts (a test of internal/limits holds the two together).
const LimitsValueBytes = 32 << 10

// TasksTTL is how long an MCP task's record is kept after its last
// change: the task's ttlMs.
const TasksTTL = 24 * time.Hour

// LimitsKeyValueConfig is the limits bucket's configuration: one revision
// per key (a count is replaced whole, by compare-and-set), per-key TTLs
// with markers (a count ends with its window or lease), and discard new
// when full, so a count is never silently forgotten.
func LimitsKeyValueConfig(bucket string, replicas int, maxBytes int64) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:         bucket,
		Description:    "toolwire rate limits, concurrency slots, budgets and loop-guard runs",
		History:        1,
		MaxValueSize:   LimitsValueBytes,
		MaxBytes:       maxBytes,
		Storage:        jetstream.FileStorage,
		Replicas:       max(replicas, 1),
		LimitMarkerTTL: time.Minute,
	}
}
