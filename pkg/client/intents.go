package client

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"connectrpc.com/connect"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Two ways to apply the intents of a response (the state changes a tool
// asks for, see tool.EmitIntent):
//
//   - the reference applier in the dispatcher keeps session state for you:
//     call with WithSession and WithApplyIntents (or ApplyIntents later)
//     and read it with GetSession;
//   - an orchestrator with its own state implements Applier and hands each
//     Result to ApplyTo.

// WithApplyIntents makes Call apply the response's intents to the call's
// session (WithSession is required) with the dispatcher's reference
// applier before answering; Result.Session is the session afterwards.
func WithApplyIntents() CallOption {
	return func(s *callSettings) { s.opts.ApplyIntents = true }
}

// GetSession returns the state the reference applier keeps for a session
// of your tenant; a session nothing was applied to is empty (revision 0).
func (c *Client) GetSession(ctx context.Context, session string) (*toolwirev1.Session, error) {
	resp, err := c.rpc.GetSession(ctx, connect.NewRequest(&toolwirev1.GetSessionRequest{Session: session}))
	if err != nil {
		return nil, transportError("get session", err)
	}
	return resp.Msg.GetSession(), nil
}

// SetSessionMode sets the mode of a session of the caller's tenant (a
// mode the policy in force declares; "" clears it), as a SET_MODE intent
// the reference applier applies, and returns the session. It needs a key
// with the admin scope: a mode restricts the session's calls.
func (c *Client) SetSessionMode(ctx context.Context, session, mode string) (*toolwirev1.Session, error) {
	resp, err := c.rpc.SetSessionMode(ctx, connect.NewRequest(&toolwirev1.SetSessionModeRequest{Session: session, Mode: mode}))
	if err != nil {
		return nil, transportError("set session mode", err)
	}
	return resp.Msg.GetSession(), nil
}

// SessionPage selects one page of ListSessions.
type SessionPage struct {
	// State: every session (unspecified), the active or the ended ones.
	State toolwirev1.SessionStateFilter
	// Mode, when not empty, keeps the sessions in that mode.
	Mode string
	// Size: 0 = 50, at most 500.
	Size int
	// Token: the previous page's next token; empty = the first page.
	Token string
}

// ListSessions lists one page of the sessions of your tenant in the order
// of their last update, oldest first, each without its log and state
// values (GetSession reads them), and the token of the next page (empty
// after the last). A page may be short and still have a next one. Under
// agent visibility "own" it needs a key with the admin or approve scope.
func (c *Client) ListSessions(ctx context.Context, p SessionPage) ([]*toolwirev1.Session, string, error) {
	resp, err := c.rpc.ListSessions(ctx, connect.NewRequest(&toolwirev1.ListSessionsRequest{State: p.State, Mode: p.Mode,
		PageSize: int32(min(max(p.Size, 0), 500)), PageToken: p.Token}))
	if err != nil {
		return nil, "", transportError("list sessions", err)
	}
	return resp.Msg.GetSessions(), resp.Msg.GetNextPageToken(), nil
}

// EndSession ends a session of your tenant (an END_SESSION intent the
// reference applier applies, reason at most 1,000 bytes): its later calls
// are refused SESSION_INACTIVE. Ending an ended session changes nothing
// and returns it. It needs a key with the admin scope.
func (c *Client) EndSession(ctx context.Context, session, reason string) (*toolwirev1.Session, error) {
	resp, err := c.rpc.EndSession(ctx, connect.NewRequest(&toolwirev1.EndSessionRequest{Session: session, Reason: reason}))
	if err != nil {
		return nil, transportError("end session", err)
	}
	return resp.Msg.GetSession(), nil
}

// ApplyIntents applies the intents of a finished call to the call's
// session with the reference applier, each intent exactly once: repeating
// it applies nothing new. Intents the tool's spec version does not declare
// (or malformed ones) are refused, each recorded with its reason in the
// session's log (AppliedIntent.refused). It returns the session and how
// many intents it applied now.
func (c *Client) ApplyIntents(ctx context.Context, callID string) (*toolwirev1.Session, int, error) {
	resp, err := c.rpc.ApplyIntents(ctx, connect.NewRequest(&toolwirev1.ApplyIntentsRequest{CallId: callID}))
	if err != nil {
		return nil, 0, transportError("apply intents of "+callID, err)
	}
	return resp.Msg.GetSession(), int(resp.Msg.GetApplied()), nil
}

// Applier applies intents to an orchestrator's own state.
type Applier interface {
	// Apply applies one intent of the call callID. Intents of one response
	// arrive in order. An error stops ApplyTo; the intents after it are
	// not applied.
	Apply(ctx context.Context, callID string, in *toolwirev1.Intent) error
}

// ApplierFunc adapts a function to Applier.
type ApplierFunc func(ctx context.Context, callID string, in *toolwirev1.Intent) error

// Apply calls f.
func (f ApplierFunc) Apply(ctx context.Context, callID string, in *toolwirev1.Intent) error {
	return f(ctx, callID, in)
}

// ApplyTo hands the intents of a successful result to a, in order. A
// failed call has no intents. They are the intents as stored, unchecked
// here: the reference applier refuses those the tool's spec version does
// not declare, and an Applier of yours should check them too (the tool's
// declared intents are in its spec, GetTool). Results can arrive more than once
// (at-least-once delivery, retried requests): wrap a with Once, or
// remember "<call id>/<intent id>" keys in your own store, to apply each
// intent once.
func (r *Result) ApplyTo(ctx context.Context, a Applier) error {
	for _, in := range r.Intents() {
		if err := a.Apply(ctx, r.CallID, in); err != nil {
			return fmt.Errorf("client: apply intent %s (%s) of %s: %w", in.GetId(), in.GetType(), r.CallID, err)
		}
	}
	return nil
}

// Payload decodes an intent's JSON payload into v (an absent payload
// decodes as {}).
func Payload(in *toolwirev1.Intent, v any) error {
	p := in.GetPayloadJson()
	if p == "" {
		p = "{}"
	}
	if err := json.Unmarshal([]byte(p), v); err != nil {
		return fmt.Errorf("client: payload of intent %s (%s): %w", in.GetId(), in.GetType(), err)
	}
	return nil
}

// SetState is the payload of a SET_STATE intent.
type SetState struct {
	Key string `json:"key"`
	// Value is the new value as JSON; "null" deletes the key.
	Value json.RawMessage `json:"value"`
}

// Notify is the payload of a NOTIFY intent.
type Notify struct {
	Message string `json:"message"`
	// Level is "info", "warning" or "error"; empty = info.
	Level string `json:"level,omitempty"`
}

// Once wraps a so that each intent (by call id and intent id) is applied
// at most once by this process: repeats among the most recent n intents
// are skipped (n <= 0 means 4096). A failed Apply is not remembered, so it
// can be retried. Applies through one Once are serialised.
func Once(a Applier, n int) Applier {
	if n <= 0 {
		n = 4096
	}
	return &once{next: a, max: n, seen: map[string]*list.Element{}, order: list.New()}
}

type once struct {
	next  Applier
	max   int
	mu    sync.Mutex
	seen  map[string]*list.Element
	order *list.List
}

func (o *once) Apply(ctx context.Context, callID string, in *toolwirev1.Intent) error {
	key := callID + "/" + in.GetId()
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, dup := o.seen[key]; dup {
		return nil
	}
	if err := o.next.Apply(ctx, callID, in); err != nil {
		return err
	}
	o.seen[key] = o.order.PushBack(key)
	if o.order.Len() > o.max {
		oldest := o.order.Front()
		o.order.Remove(oldest)
		delete(o.seen, oldest.Value.(string))
	}
	return nil
}

// ClearSessionPins clears the spec versions a session of the caller's
// tenant pins (tool's, or every tool's when tool is ""), so that the
// session's next call of a tool pins the version current then, and
// returns the session. It needs a key with the admin scope.
func (c *Client) ClearSessionPins(ctx context.Context, session, tool string) (*toolwirev1.Session, error) {
	resp, err := c.rpc.ClearSessionPins(ctx, connect.NewRequest(&toolwirev1.ClearSessionPinsRequest{Session: session, Tool: tool}))
	if err != nil {
		return nil, transportError("clear session pins", err)
	}
	return resp.Msg.GetSession(), nil
}
