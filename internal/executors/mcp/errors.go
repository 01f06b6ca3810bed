package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

const (
	sideEffectsNone    = toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE
	sideEffectsUnknown = toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN
	sideEffectsMaybe   = toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_POSSIBLE
)

// refused is an error raised before the call reached the server: nothing
// happened, and running it again as is would fail the same way.
func refused(t toolwirev1.ErrorType, format string, args ...any) *tool.Error {
	return &tool.Error{Type: t, Message: fmt.Sprintf(format, args...), SideEffects: sideEffectsNone}
}

// codeRejectedByTransport is the code of the SDK's jsonrpc2.ErrRejected,
// which it does not export: its client wraps with it every HTTP request
// that failed before a response came.
const codeRejectedByTransport = -32005

// callError maps an error of CallTool (not an isError result):
//
//   - the call's context ended: the context's error, wrapped, which
//     tool.AsError maps to TIMEOUT or CANCELLED (the SDK has sent
//     notifications/cancelled);
//   - JSON-RPC -32602 invalid params: VALIDATION with no side effects, or
//     NOT_FOUND when the message says the tool is unknown (servers answer
//     an unknown tool with -32602, as the MCP specification asks);
//   - -32601 method not found: NOT_FOUND with no side effects;
//   - any other JSON-RPC error: PERMANENT, side effects possible;
//   - anything else (the connection was lost or closed mid-call), and the
//     SDK's "rejected by transport" (-32005, its wrapping of an HTTP
//     request that failed, such as one sent on a connection the server
//     had just cut when it restarted):
//     TRANSIENT and retryable, side effects NONE for read-only tools and
//     UNKNOWN otherwise (the worker reruns only tools safe to rerun).
func callError(ctx context.Context, ts *toolState, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("mcp: call of %s: %w", ts.spec.GetName(), ctx.Err())
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) && we.Code != codeRejectedByTransport {
		msg := fmt.Sprintf("MCP server %s: %s (JSON-RPC error %d)", ts.server.cfg.Name, we.Message, we.Code)
		switch we.Code {
		case jsonrpc.CodeInvalidParams:
			if strings.HasPrefix(strings.ToLower(we.Message), "unknown tool") {
				return &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, Message: msg, SideEffects: sideEffectsNone, Cause: err}
			}
			return &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, Message: msg, SideEffects: sideEffectsNone, Cause: err}
		case jsonrpc.CodeMethodNotFound:
			return &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, Message: msg, SideEffects: sideEffectsNone, Cause: err}
		}
		return &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, Message: msg, SideEffects: sideEffectsMaybe, Cause: err}
	}
	se := sideEffectsUnknown
	if ts.spec.GetAnnotations().GetReadOnly() {
		se = sideEffectsNone
	}
	return &tool.Error{
		Type:        toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT,
		Message:     fmt.Sprintf("lost the connection to MCP server %s during the call: %v", ts.server.cfg.Name, err),
		Retryable:   true,
		SideEffects: se,
		Cause:       err,
	}
}

// resultError is the error of an isError result: PERMANENT with possible
// side effects unless its `_meta["toolwire/error"]` says otherwise. It
// keeps the result's blocks, structured output and `_meta`; its message is
// the text of its text blocks.
func resultError(ts *toolState, res *sdk.CallToolResult, content []*toolwirev1.Content, structured, meta []byte) *tool.Error {
	var texts []string
	for _, c := range content {
		if t := c.GetText(); t != nil && t.Text != "" {
			texts = append(texts, t.Text)
		}
	}
	te := &tool.Error{
		Type:        toolwirev1.ErrorType_ERROR_TYPE_PERMANENT,
		Message:     strings.Join(texts, "\n"),
		SideEffects: sideEffectsMaybe,
		Content:     content,
		Structured:  structured,
		Meta:        meta,
	}
	if te.Message == "" {
		te.Message = fmt.Sprintf("tool %s of MCP server %s reported an error", ts.tool.Name, ts.server.cfg.Name)
	}
	raw, ok := res.Meta[MetaError]
	if !ok {
		return te
	}
	var me metaError
	b, err := json.Marshal(raw)
	if err == nil {
		err = json.Unmarshal(b, &me)
	}
	if err != nil {
		te.Message += fmt.Sprintf(" (ignored an undecodable _meta[%q]: %v)", MetaError, err)
		return te
	}
	if t, ok := parseEnum(toolwirev1.ErrorType_value, "ERROR_TYPE_", me.Type); ok && t != 0 {
		te.Type = toolwirev1.ErrorType(t)
	}
	te.Retryable = tool.DefaultRetryable(te.Type)
	if me.Retryable != nil {
		te.Retryable = *me.Retryable
	}
	if s, ok := parseEnum(toolwirev1.PartialSideEffects_value, "PARTIAL_SIDE_EFFECTS_", me.SideEffects); ok && s != 0 {
		te.SideEffects = toolwirev1.PartialSideEffects(s)
	}
	te.RetryAfter = me.retryAfter()
	te.Suggestion = me.Suggestion
	return te
}

// parseEnum accepts an enum value name with or without its prefix, in any
// case.
func parseEnum(values map[string]int32, prefix, s string) (int32, bool) {
	if s == "" {
		return 0, false
	}
	s = strings.ToUpper(s)
	if v, ok := values[s]; ok {
		return v, true
	}
	v, ok := values[prefix+s]
	return v, ok
}
