package hooks

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/redact"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/startstop"
	"github.com/toolwire/toolwire/pkg/hook"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Caller runs a call through the core's admission as the caller id and
// waits up to wait for its result (dispatch.Dispatcher.Call). The hooks
// make their own calls with it, in a context IsHookCall reports.
type Caller interface {
	Call(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest, wait time.Duration) (*toolwirev1.CallResponse, error)
}

// Policies gives the policy in force per tenant (nil for none).
type Policies interface {
	For(tenant string) *policy.Policy
}

// Specs reads a tool's spec at a version ("" = its current one) from the
// registry (registry.Store).
type Specs interface {
	GetVersion(ctx context.Context, name, version string) (*registry.Entry, error)
}

// Config configures the hooks of a dispatcher.
type Config struct {
	// Bus is the dispatcher's bus: the after-hook service subscribes on
	// its connection. Required.
	Bus *bus.Bus
	// Specs gives the specs of the hooked tools. Required.
	Specs Specs
	// Policies gives the policy in force per tenant, which binds the
	// hooks; nil = no policy, and no hook runs.
	Policies Policies
	// Caller makes the hooks' own calls. Required.
	Caller Caller
	// ArgLimits are the limits admission holds a call's arguments to
	// (the tool spec's win): a before-hook's rewrite is checked against
	// them again. Zero fields are the registry's meaning (MaxValues 0 =
	// not counted).
	ArgLimits registry.ArgLimits
	// ErrStopped is the error Caller returns once the core has stopped
	// (dispatch.ErrStopped): an after-hook call that fails with it is not
	// the hook's failure, and the worker asks another replica. Nil = none.
	ErrStopped error
	// Logger logs failed hooks and refused requests. Default
	// slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with its defaults filled in.
func (c Config) WithDefaults() Config {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate names the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Bus == nil:
		return errors.New("hooks: Bus is required")
	case c.Specs == nil:
		return errors.New("hooks: Specs is required")
	case c.Caller == nil:
		return errors.New("hooks: Caller is required")
	}
	return nil
}

// Hooks runs the hooks the policy in force binds: the before-hooks of the
// calls admission admits (Before), the after-hooks it names in them
// (BindAfter), and, as a startstop.Service, the service that runs those
// after-hooks for the workers (Start, Stop).
type Hooks struct {
	cfg Config
	log *slog.Logger
	svc startstop.Funcs // the after-hook service (service.go)
}

var _ startstop.Service = (*Hooks)(nil)

// New returns the hooks of cfg; the after-hook service runs once Start has
// returned.
func New(cfg Config) (*Hooks, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	hs := &Hooks{cfg: cfg, log: cfg.Logger}
	hs.svc.StartFunc = hs.serve
	return hs, nil
}

// policyFor is the policy in force for tenant, nil for none.
func (hs *Hooks) policyFor(tenant string) *policy.Policy {
	if hs.cfg.Policies == nil {
		return nil
	}
	return hs.cfg.Policies.For(tenant)
}

// hookCallKey marks the context of a hook's own call: hooks, the loop
// guard and the limits never run on it (no recursion, and a hook call is
// the fleet's own work).
type hookCallKey struct{}

// IsHookCall reports whether ctx is the context of a hook's own call:
// one the hooks made through Caller. No hook runs on it, and the core
// runs no loop guard or limits on it either, and lets the rules pass a
// tool the policy binds as a hook.
func IsHookCall(ctx context.Context) bool { return ctx.Value(hookCallKey{}) != nil }

// request is one call of a hook tool: hook of the tenant's policy, with
// args (a hook.BeforeRequest or a hook.AfterRequest) as its arguments.
type request struct {
	tenant string
	hook   *policy.Hook
	args   any
}

// call calls the hook through the fleet and reads its answer into ans:
// the hook's structured result, or its first text block, as JSON. The
// call is the fleet's own (agent "hook:<id>"): hooks, the loop guard and
// the limits never run on it, and it is bounded by the hook's timeout.
func (hs *Hooks) call(ctx context.Context, r request, ans any) error {
	data, err := json.Marshal(r.args)
	if err != nil {
		return err
	}
	h := r.hook
	hctx, cancel := context.WithTimeout(context.WithValue(ctx, hookCallKey{}, h.ID), h.Timeout+time.Second)
	defer cancel()
	hid := identity.Identity{Tenant: r.tenant, Agent: "hook:" + h.ID, Scopes: []string{"*"}}
	resp, err := hs.cfg.Caller.Call(hctx, hid, &toolwirev1.CallRequest{Tool: h.Tool, ArgumentsJson: string(data),
		ScheduleToClose: durationpb.New(h.Timeout)}, h.Timeout)
	if err != nil {
		return err
	}
	if resp.State != toolwirev1.CallState_CALL_STATE_DONE {
		return fmt.Errorf("no answer within %s", h.Timeout)
	}
	if !resp.Response.GetOk() {
		e := resp.Response.GetError()
		return fmt.Errorf("%s: %s", e.GetType(), e.GetMessage())
	}
	raw := resp.Response.GetStructuredJson()
	if raw == "" {
		for _, ct := range resp.Response.GetContent() {
			if t := ct.GetText(); t != nil {
				raw = t.GetText()
				break
			}
		}
	}
	if err := json.Unmarshal([]byte(raw), ans); err != nil {
		return fmt.Errorf("its answer is not a hook answer (JSON with an action): %w", err)
	}
	return nil
}

// arguments are the call's arguments as a hook sees them: a hook never
// sees the values the tool's schema marks secret (a hook may be a third
// party's webhook, and its call is stored and audited like any): they
// reach it as redact.Redacted.
func arguments(spec *toolwirev1.ToolSpec, call *toolwirev1.ToolCall) json.RawMessage {
	if plan := redact.ForSpec(spec); plan != nil {
		return plan.Arguments(call.Arguments)
	}
	return json.RawMessage(call.Arguments)
}

// callerOf is the caller of the call as a hook sees it.
func callerOf(call *toolwirev1.ToolCall) hook.Caller {
	c := call.GetCaller()
	return hook.Caller{Tenant: c.GetTenant(), Agent: c.GetAgent(), Session: c.GetSession(), User: c.GetUser(), Run: c.GetRun()}
}
