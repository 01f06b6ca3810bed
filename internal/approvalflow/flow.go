package approvalflow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/startstop"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Scopes of the approval flow.
const (
	// ApproveScope lets a caller list, approve and deny the parked calls
	// of its tenant, and list and revoke its grants.
	ApproveScope = "approve"
	// ConfirmScope lets a caller receive an approval token with
	// CONFIRMATION_REQUIRED, and present one (when the dispatchers hold
	// token keys).
	ConfirmScope = "confirm"
)

// Errors of the approval methods.
var (
	// ErrNeedApproveScope: the caller does not hold the "approve" scope.
	ErrNeedApproveScope = errors.New(`approvalflow: approvals and grants need the "approve" scope`)
	// ErrUnknownApproval: no approval (or grant) with that id in the
	// caller's tenant.
	ErrUnknownApproval = errors.New("approvalflow: unknown approval")
	// ErrApprovalDecided: the approval was decided already (or expired),
	// so it cannot be decided again.
	ErrApprovalDecided = errors.New("approvalflow: approval already decided")
	// ErrBadApproval: the request is not valid (no reason for a denial, a
	// bad scope, glob, argument pattern or ttl).
	ErrBadApproval = errors.New("approvalflow: invalid approval request")
	// ErrPolicyDenies: the policy in force now denies the parked call (it
	// changed after the call was parked): the call is denied and
	// answered, never run. Deny wins, also over an approver.
	ErrPolicyDenies = errors.New("approvalflow: the policy in force denies this call")
	// ErrSessionInactive: the parked call's session ended while it
	// waited: the call is denied and answered SESSION_INACTIVE, never
	// run.
	ErrSessionInactive = errors.New("approvalflow: the call's session has ended")
)

// Refusal is why a parked call must not run now (Core.Denies).
type Refusal struct {
	// Type is the error type the call is answered with:
	// PERMISSION_DENIED (the policy in force denies it), MODE_RESTRICTED
	// (its session's mode now forbids it) or SESSION_INACTIVE (its
	// session ended).
	Type toolwirev1.ErrorType
	// Why says so, naming the rule, the mode or the session.
	Why string
}

// Core is what the flow needs of the dispatcher it runs in: the paths by
// which a call is queued, an event recorded and a call answered. The
// dispatcher implements it; the flow never imports the dispatcher.
type Core interface {
	// PublishCall queues an approved call as admission queues one: on its
	// calls subject, message id the call id (a repeat within the calls
	// stream's duplicate window is stored once), the calls stream
	// expected, published again while unanswered; then its ACCEPTED
	// record, timed now (an approved call is queued when it is approved).
	PublishCall(ctx context.Context, call *toolwirev1.ToolCall) error
	// RecordEvent records ev, an event of call ev.CallId of tenant, in
	// the events stream with message id msgID (a decision finished twice
	// is recorded once), waiting a short while for the stream to store
	// it.
	RecordEvent(ctx context.Context, tenant, msgID string, ev *toolwirev1.CallEvent) error
	// Answer publishes resp as the terminal result of call on its results
	// subject, with ExpectLastSequencePerSubject(0) as workers publish:
	// never over a result, and a repeat that finds its own is no error.
	Answer(ctx context.Context, call *toolwirev1.ToolCall, resp *toolwirev1.ToolResponse) error
	// Denies decides call, a parked call, again as admission would now:
	// its session's state (ended: SESSION_INACTIVE) and the policy in
	// force for its tenant in the session's mode now (a deny: why, naming
	// the rule; the mode's deny is MODE_RESTRICTED). nil when it may run:
	// an ask or an allow is no deny, nor is the stand-in a replica holds
	// while it cannot load a tenant's document. An error says it could not
	// be decided (the registry or the session did not answer): nothing is
	// approved meanwhile.
	Denies(ctx context.Context, call *toolwirev1.ToolCall) (*Refusal, error)
	// PolicyVersion is the version of the policy in force for tenant
	// ("" for none): the sweep decides the parked calls of a tenant again
	// when it changes.
	PolicyVersion(tenant string) string
}

// Config configures a Flow. The dispatcher passes its own settings
// (dispatch.Config's ApprovalTTL, GrantTTL, ApprovalRetention,
// ApprovalSweep and TokenKeys).
type Config struct {
	// TTL is how long a parked call waits for an approver; then it
	// expires (EXPIRED answer, APPROVAL_EXPIRED event). It is also the
	// life of an approval token, and of an approval's binding for a call
	// that has no schedule-to-close deadline. Default 24h; at least 1s.
	TTL time.Duration
	// GrantTTL is the life of a grant whose approver gave none. Default
	// 24h; at least 1s.
	GrantTTL time.Duration
	// Retention is how long decided records and used nonces are kept
	// (approvals.NewStore). Default 0: the bus's CallsMaxAge; not
	// negative.
	Retention time.Duration
	// Sweep is how often the sweep runs (sweep.go). Default 2s; at least
	// 10ms.
	Sweep time.Duration
	// FinishTimeout bounds finishing a decision once it is made (the
	// nonce, the events, the publish with its retries, the record): it is
	// finished also when the approver's request ends first. It bounds the
	// sweep's work on one record too. Default 30s; at least 1s.
	FinishTimeout time.Duration
	// TokenKeys sign and verify approval tokens. Nil = no tokens: none is
	// issued, and a call presenting one is refused.
	TokenKeys *approvals.Keys
	// Logger receives the flow's warnings. Default slog.Default().
	Logger *slog.Logger
	// BeforeFinish, when set (a test's hook), runs before an approved
	// call is finished; an error stops the finishing there, as a replica
	// that stopped right after the decision would. Nil in production.
	BeforeFinish func() error
}

// The defaults of Config (and of the dispatcher's approval settings).
const (
	DefaultTTL      = 24 * time.Hour  // how long a parked call waits for an approver
	DefaultGrantTTL = 24 * time.Hour  // how long a grant lasts without a ttl of its own
	DefaultSweep    = 2 * time.Second // how often the sweep runs
)

// WithDefaults returns a copy of c with the defaults filled in.
func (c Config) WithDefaults() Config {
	c.TTL = cmp.Or(c.TTL, DefaultTTL)
	c.GrantTTL = cmp.Or(c.GrantTTL, DefaultGrantTTL)
	c.Sweep = cmp.Or(c.Sweep, DefaultSweep)
	c.FinishTimeout = cmp.Or(c.FinishTimeout, 30*time.Second)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate names the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.TTL < time.Second:
		return fmt.Errorf("approvalflow: TTL %s is below 1s", c.TTL)
	case c.GrantTTL < time.Second:
		return fmt.Errorf("approvalflow: GrantTTL %s is below 1s", c.GrantTTL)
	case c.Retention < 0:
		return fmt.Errorf("approvalflow: Retention %s must not be negative", c.Retention)
	case c.Sweep < 10*time.Millisecond:
		return fmt.Errorf("approvalflow: Sweep %s is below 10ms", c.Sweep)
	case c.FinishTimeout < time.Second:
		return fmt.Errorf("approvalflow: FinishTimeout %s is below 1s", c.FinishTimeout)
	}
	return nil
}

// Flow runs the approval flow of one dispatcher replica over the
// approvals bucket: parking, deciding, redeeming tokens, finishing
// decisions, reading, and the sweep. It is safe for concurrent use, and
// a startstop.Service: Start starts the grant index, the record tracker
// and the sweep, in that order; Stop ends them in reverse.
type Flow struct {
	cfg  Config
	core Core
	log  *slog.Logger
	// duplicateWindow is the calls stream's (sweep.go).
	duplicateWindow time.Duration

	store   *approvals.Store
	tracker *approvals.Tracker
	grants  *approvals.GrantIndex
	run     *startstop.Group
	// checked is, per tenant with parked calls, how far they were decided
	// again under which policy version (recheckParked; the sweep's own).
	checked map[string]recheckMark
}

var _ startstop.Service = (*Flow)(nil)

// New returns the flow over b's approvals bucket, queuing and answering
// calls through core. Start starts it.
func New(b *bus.Bus, core Core, cfg Config) (*Flow, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f := &Flow{cfg: cfg, core: core, log: cfg.Logger, duplicateWindow: b.Config.DuplicateWindow, checked: map[string]recheckMark{}}
	f.store = approvals.NewStore(b, cfg.Retention)
	f.tracker = approvals.NewTracker(f.store, f.log)
	f.grants = approvals.NewGrantIndex(f.store, f.log)
	f.run = startstop.NewGroup(
		// The grants in force, loaded before Start returns, so that
		// admission decides with them.
		startstop.Named{Name: "grant index", Service: f.grants},
		// The records the sweep acts on.
		startstop.Named{Name: "approval tracker", Service: f.tracker},
		startstop.Named{Name: "approval sweep", Service: startstop.Every(f.cfg.Sweep, f.sweep)},
	)
	return f, nil
}

// Start starts the grant index (returning once the grants stored now are
// loaded), the record tracker and the sweep. A failed Start leaves
// nothing running.
func (f *Flow) Start(ctx context.Context) error { return f.run.Start(ctx) }

// Stop ends the sweep, the tracker and the grant index, and waits for
// them (or ctx).
func (f *Flow) Stop(ctx context.Context) error { return f.run.Stop(ctx) }

// Record reads the record of approval (call) id of tenant. Errors:
// approvals.ErrNotFound, and the bucket's.
func (f *Flow) Record(ctx context.Context, tenant, id string) (*approvals.Record, error) {
	return f.store.Get(ctx, tenant, id)
}

// Grants is where the policy decision finds grants: this replica's index
// of the grants in the approvals bucket, kept current by a watch.
func (f *Flow) Grants() policy.GrantSource { return f.grants }
