package client

import (
	"context"

	"connectrpc.com/connect"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// OutputQuery says what GetOutput reads of a call's output text.
type OutputQuery struct {
	// Offset is the byte offset to read from; with Grep, the lines that
	// start at or after it are searched.
	Offset int64
	// Limit is the most bytes of text returned (of matching lines with
	// Grep); 0 = 64 KiB, at most 1 MiB.
	Limit int64
	// Grep, when set, returns only the lines matching this RE2 regular
	// expression (Go regexp syntax, at most 1,024 bytes).
	Grep string
}

// GetOutput reads the output text of a finished call of your tenant: its
// text blocks joined by newlines (its structured JSON when it has none),
// all of it also when the inline response was truncated to the tool's
// output limits (Result.Response.Meta.Truncated). Read on from the
// answer's NextOffset until Eof.
//
// A nil error means the call finished and the answer holds the range (or
// the matching lines). Otherwise GetOutput returns a *StateError matching
// ErrPending or ErrUnknownCall, or a transport error wrapping the
// *connect.Error (invalid_argument for a bad pattern, not_found for an
// output the blob store no longer holds).
func (c *Client) GetOutput(ctx context.Context, callID string, q OutputQuery) (*toolwirev1.GetOutputResponse, error) {
	req := &toolwirev1.GetOutputRequest{CallId: callID, Offset: q.Offset, Limit: q.Limit, Grep: q.Grep}
	resp, err := c.rpc.GetOutput(ctx, connect.NewRequest(req))
	if unknownCallErr(err) {
		return nil, &StateError{CallID: callID, State: toolwirev1.CallState_CALL_STATE_UNKNOWN}
	}
	if err != nil {
		return nil, transportError("get output of "+callID, err)
	}
	if s := resp.Msg.GetState(); s != toolwirev1.CallState_CALL_STATE_DONE {
		return nil, &StateError{CallID: callID, State: s}
	}
	return resp.Msg, nil
}
