package hooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/hooks"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// errCoreStopped is what the core answers once it has stopped.
var errCoreStopped = errors.New("core stopped")

// hookCall is one call the hooks made through the core.
type hookCall struct {
	id       identity.Identity
	req      *toolwirev1.CallRequest
	wait     time.Duration
	hookCall bool // the call's context says IsHookCall
}

// core stands for the dispatcher: it answers the hooks' calls with answer
// and records them.
type core struct {
	mu     sync.Mutex
	calls  []hookCall
	answer func(ctx context.Context, req *toolwirev1.CallRequest) (*toolwirev1.CallResponse, error)
}

func (c *core) Call(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest, wait time.Duration) (*toolwirev1.CallResponse, error) {
	c.mu.Lock()
	c.calls = append(c.calls, hookCall{id: id, req: o, wait: wait, hookCall: hooks.IsHookCall(ctx)})
	c.mu.Unlock()
	return c.answer(ctx, o)
}

func (c *core) take() []hookCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = nil
	return out
}

// done is the response of a hook call that answered v as its structured
// result.
func done(t *testing.T, v any) *toolwirev1.CallResponse {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return &toolwirev1.CallResponse{State: toolwirev1.CallState_CALL_STATE_DONE,
		Response: &toolwirev1.ToolResponse{Ok: true, StructuredJson: string(b)}}
}

// onePolicy is the policy in force for every tenant.
type onePolicy struct{ p *policy.Policy }

func (o onePolicy) For(string) *policy.Policy { return o.p }

// specs is a registry of fixed entries, by name.
type specs map[string]*registry.Entry

func (s specs) GetVersion(_ context.Context, name, _ string) (*registry.Entry, error) {
	if e, ok := s[name]; ok {
		return e, nil
	}
	return nil, registry.ErrNotFound
}

// echoSpecs holds echo, whose one argument text is a string.
func echoSpecs(t *testing.T) specs {
	t.Helper()
	sch, err := registry.DefaultSchemas.Compile(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)
	require.NoError(t, err)
	return specs{"echo": {Spec: &toolwirev1.ToolSpec{Name: "echo", Version: "v1"}, Input: sch}}
}

type bundle struct {
	hooks *hooks.Hooks
	core  *core
}

// setup returns hooks bound by the policy document doc, on b (nil: a
// bus no test here uses), whose calls core answers.
func setup(t *testing.T, b *bus.Bus, doc string) *bundle {
	t.Helper()
	p, err := policy.Parse([]byte(doc))
	require.NoError(t, err)
	if b == nil {
		b = &bus.Bus{}
	}
	c := &core{}
	hs, err := hooks.New(hooks.Config{Bus: b, Specs: echoSpecs(t), Policies: onePolicy{p}, Caller: c,
		ArgLimits: registry.ArgLimits{MaxBytes: 1 << 10, MaxDepth: 8, MaxValues: 64}, ErrStopped: errCoreStopped})
	require.NoError(t, err)
	return &bundle{hooks: hs, core: c}
}

// echoCall is a call of echo with text, as admission made it.
func echoCall(text string) *toolwirev1.ToolCall {
	args, _ := json.Marshal(map[string]string{"text": text})
	return &toolwirev1.ToolCall{CallId: "c1", Tool: "echo", SpecVersion: "v1", Arguments: args,
		Caller: &toolwirev1.Caller{Tenant: "acme", Agent: "bot", Session: "s1"}}
}
