package client

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ErrWatchEnded is returned by Watch when the dispatcher ended the stream
// before the call's terminal event (a dispatcher shutting down, a proxy
// cutting a long response). The call itself is unaffected: watch it again
// or fetch its result with GetResult.
var ErrWatchEnded = errors.New("toolwire: watch ended before the call finished")

// Watch calls fn with each lifecycle and progress event of the call callID,
// from its admission on — earlier events are replayed — until the call's
// terminal event:
//
//   - CALL_EVENT_TYPE_FINISHED, which carries the terminal response in
//     its Response field (Final turns it into a Result), or
//   - CALL_EVENT_TYPE_REJECTED, for a call refused at admission; the
//     rejection is in its Error field.
//
// Watch returns nil after fn has handled the terminal event. Any
// dispatcher replica streams any call of the caller's tenant, whichever
// replica admitted it. Events arrive in the order the fabric stored them:
// ACCEPTED (stored once the call is queued, so a fast worker's STARTED may
// precede it), per attempt STARTED, PROGRESS (a tool's partial output is a
// PROGRESS event with Partial and PartialSeq, the chunk's number in its
// attempt: docs/tools.md) and RETRYING, and
// CANCEL_REQUESTED when the call is cancelled. Events other than the
// terminal one are best effort and may be missing after a fault; the
// terminal event always comes, and always last.
//
// Otherwise Watch returns:
//
//   - the error fn returned, as is, when fn fails; the stream is closed;
//   - a *StateError matching ErrUnknownCall for an id the dispatcher does
//     not know in the caller's tenant;
//   - an error matching ErrWatchEnded when the stream ended early;
//   - a transport error wrapping the *connect.Error (unreachable
//     dispatcher, bad API key, ctx done).
func (c *Client) Watch(ctx context.Context, callID string, fn func(*toolwirev1.CallEvent) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream when Watch returns early
	stream, err := c.rpc.Watch(ctx, connect.NewRequest(&toolwirev1.WatchRequest{CallId: callID}))
	if err != nil {
		return watchError(callID, err)
	}
	defer func() { _ = stream.Close() }()
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		if ev == nil {
			continue
		}
		if err := fn(ev); err != nil {
			return err
		}
		if terminalEvent(ev.GetType()) {
			return nil
		}
	}
	if err := stream.Err(); err != nil {
		return watchError(callID, err)
	}
	return fmt.Errorf("toolwire client: watch %s: %w", callID, ErrWatchEnded)
}

// Final returns the Result a terminal event of Watch carries: the
// terminal response of a FINISHED event, or for a REJECTED event the
// rejection as GetResult would return it. It returns nil for any other
// event.
func Final(ev *toolwirev1.CallEvent) *Result {
	switch ev.GetType() {
	case toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED:
		if ev.GetResponse() == nil {
			return nil
		}
		return &Result{CallID: ev.GetCallId(), Response: ev.GetResponse()}
	case toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED:
		// The one envelope built outside internal/envelope: a public
		// package may not import it. Version 1 is envelope.Version (a
		// test holds them equal).
		return &Result{CallID: ev.GetCallId(), Response: &toolwirev1.ToolResponse{EnvelopeVersion: 1,
			CallId: ev.GetCallId(), Tool: ev.GetTool(), Error: ev.GetError(),
			Meta: &toolwirev1.ResponseMeta{Source: "dispatcher", AcceptedAt: ev.GetTime(), FinishedAt: ev.GetTime()}}}
	}
	return nil
}

func terminalEvent(t toolwirev1.CallEventType) bool {
	return t == toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED || t == toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED
}

func watchError(callID string, err error) error {
	if connect.CodeOf(err) == connect.CodeNotFound {
		return &StateError{CallID: callID, State: toolwirev1.CallState_CALL_STATE_UNKNOWN}
	}
	return transportError("watch "+callID, err)
}
