package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"connectrpc.com/connect"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Call submits a call of tool with args and waits for its terminal
// response (see WithWait).
//
// args is nil (no arguments), JSON text as json.RawMessage, []byte or
// string (sent byte for byte, so big integers and key order survive), or
// any other Go value, which is encoded with encoding/json.
//
// A nil error means the Result holds the terminal response, which may be a
// tool error: check Result.OK or Result.Err. Call returns an error only
// when there is no terminal response to return:
//
//   - a *StateError matching ErrPending when the wait ended first; the call
//     keeps running and its StateError.CallID fetches the result later;
//   - an *ApprovalRequiredError when the policy asked for approval and
//     the call is parked for an approver (at once, or, with
//     WithWaitForApproval, when the wait ended while it still was);
//   - an error from encoding args;
//   - a transport error (unreachable dispatcher, bad API key, ctx done),
//     which wraps the *connect.Error: connect.CodeOf(err) gives its code.
//     After a transport error the call may or may not have been admitted;
//     retry with WithIdempotencyKey to be safe.
func (c *Client) Call(ctx context.Context, tool string, args any, opts ...CallOption) (*Result, error) {
	s, err := newCallSettings(tool, args, opts)
	if err != nil {
		return nil, err
	}
	req := proto.Clone(s.opts).(*toolwirev1.CallRequest)
	req.Wait = positive(fitWait(ctx, s.wait, true))
	resp, err := c.rpc.Call(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, transportError("call "+tool, err)
	}
	r, err := terminal(resp.Msg.GetCallId(), resp.Msg.GetState(), resp.Msg.GetResponse())
	if r != nil {
		r.Session, r.ApplyError = resp.Msg.GetSession(), resp.Msg.GetApplyError()
	}
	if se, ok := err.(*StateError); ok {
		se.Unconfirmed = resp.Msg.GetUnconfirmed()
	}
	return r, err
}

// Submission is the outcome of Submit.
type Submission struct {
	// CallID is the call's id; for a duplicate, the id of the earlier
	// call with the same idempotency key.
	CallID string
	// Duplicate is true when the idempotency key matched an earlier call;
	// nothing new was queued.
	Duplicate bool
	// Unconfirmed is set when the calls stream had not yet acknowledged
	// the call (a partition or an election): it is accepted, may run, and
	// the dispatcher goes on publishing it. Do not submit it again without
	// the same idempotency key: GetResult on CallID tells what became of it.
	Unconfirmed bool
	// Result is set when the call already has its terminal response: it
	// was refused at admission (nothing was queued; Result.Err says why)
	// or it is a duplicate of a call that has finished. Otherwise the
	// call is queued (or parked): fetch its result with GetResult.
	Result *Result
	// Approval is set when the policy asked for approval: the call is
	// parked for an approver (see ApprovalRequiredError).
	Approval *ApprovalRequiredError
}

// Submit submits a call of tool with args without waiting for it; args is
// as for Call, and WithWait is ignored. A call refused at admission is not
// an error: it is a Submission whose Result says why. Submit returns an
// error when encoding args fails, or a transport error wrapping the
// *connect.Error.
func (c *Client) Submit(ctx context.Context, tool string, args any, opts ...CallOption) (*Submission, error) {
	s, err := newCallSettings(tool, args, opts)
	if err != nil {
		return nil, err
	}
	sreq, err := submitRequest(s.opts)
	if err != nil {
		return nil, err
	}
	resp, err := c.rpc.Submit(ctx, connect.NewRequest(sreq))
	if err != nil {
		return nil, transportError("submit "+tool, err)
	}
	sub := &Submission{CallID: resp.Msg.GetCallId(), Duplicate: resp.Msg.GetDuplicate(), Unconfirmed: resp.Msg.GetUnconfirmed()}
	r := resp.Msg.GetResponse()
	switch {
	case resp.Msg.GetState() == toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL:
		sub.Approval = approvalRequired(sub.CallID, r)
	case r != nil:
		sub.Result = &Result{CallID: sub.CallID, Response: r}
	}
	return sub, nil
}

// GetResult returns the terminal response of the call callID, waiting up
// to wait for a pending call (0 = answer at once; the dispatcher caps long
// waits, at 15m by default). Any dispatcher replica answers for any call
// of the caller's tenant. When ctx has a deadline the wait ends shortly
// before it.
//
// As with Call, a nil error means the Result holds the terminal response.
// Otherwise GetResult returns a *StateError matching ErrPending (not
// finished within the wait) or ErrUnknownCall, or a transport error
// wrapping the *connect.Error.
func (c *Client) GetResult(ctx context.Context, callID string, wait time.Duration) (*Result, error) {
	req := &toolwirev1.GetResultRequest{CallId: callID, Wait: positive(fitWait(ctx, max(wait, 0), false))}
	resp, err := c.rpc.GetResult(ctx, connect.NewRequest(req))
	if unknownCallErr(err) {
		return nil, &StateError{CallID: callID, State: toolwirev1.CallState_CALL_STATE_UNKNOWN}
	}
	if err != nil {
		return nil, transportError("get result "+callID, err)
	}
	return terminal(resp.Msg.GetCallId(), resp.Msg.GetState(), resp.Msg.GetResponse())
}

func newCallSettings(tool string, args any, opts []CallOption) (*callSettings, error) {
	a, err := argumentsJSON(args)
	if err != nil {
		return nil, fmt.Errorf("toolwire client: %s: %w", tool, err)
	}
	s := &callSettings{opts: &toolwirev1.CallRequest{Tool: tool, ArgumentsJson: a}}
	for _, opt := range opts {
		opt(s)
	}
	return s, nil
}

// terminal turns a (call id, state, response) answer into a Result, an
// *ApprovalRequiredError (a parked call) or a *StateError.
func terminal(callID string, state toolwirev1.CallState, resp *toolwirev1.ToolResponse) (*Result, error) {
	if state == toolwirev1.CallState_CALL_STATE_DONE && resp != nil {
		return &Result{CallID: callID, Response: resp}, nil
	}
	if state == toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL {
		if e := approvalRequired(callID, resp); e != nil {
			return nil, e
		}
	}
	return nil, &StateError{CallID: callID, State: state}
}

// fitWait shortens a wait so that the dispatcher answers (PENDING, with
// the call id) before ctx's deadline cuts the request off. When
// zeroIsDefault, a zero wait means "as long as ctx allows".
func fitWait(ctx context.Context, wait time.Duration, zeroIsDefault bool) time.Duration {
	deadline, ok := ctx.Deadline()
	if !ok {
		return wait
	}
	left := time.Until(deadline)
	// Headroom for the answer to travel back: a tenth of what is left,
	// at least 100ms (a loaded host) and at most 1s.
	fit := left - min(max(left/10, 100*time.Millisecond), time.Second)
	if fit <= 0 {
		return wait
	}
	if (wait == 0 && zeroIsDefault) || wait > fit {
		return fit
	}
	return wait
}

// submitRequest converts a CallRequest without its wait into the
// SubmitRequest with the same fields (the two share field numbers 1-12).
func submitRequest(c *toolwirev1.CallRequest) (*toolwirev1.SubmitRequest, error) {
	c = proto.Clone(c).(*toolwirev1.CallRequest)
	c.Wait = nil
	b, err := proto.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("client: encode request: %w", err)
	}
	out := &toolwirev1.SubmitRequest{}
	if err := proto.Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("client: encode request: %w", err)
	}
	return out, nil
}
