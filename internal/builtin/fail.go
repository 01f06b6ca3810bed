package builtin

import (
	"cmp"
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// FailInput is the input of fail.
type FailInput struct {
	Type        string `json:"type" jsonschema:"the error type to return, such as TRANSIENT or ERROR_TYPE_TRANSIENT (case-insensitive), or PANIC to panic"`
	Message     string `json:"message,omitempty" jsonschema:"the error message"`
	Retryable   *bool  `json:"retryable,omitempty" jsonschema:"whether the error is retryable; default: true for TRANSIENT, RATE_LIMIT, OVERLOADED and TIMEOUT"`
	SideEffects string `json:"side_effects,omitempty" jsonschema:"what the failed call may have changed: none, possible or unknown; default: possible"`
	RetryAfter  string `json:"retry_after,omitempty" jsonschema:"earliest sensible retry, as a Go duration such as 2s"`
}

func newFailTool() *tool.Tool {
	return tool.Must(tool.New("fail", fail,
		tool.WithTitle("Fail"),
		tool.WithSummary("Fails with the requested error type, or panics on type PANIC."),
		tool.WithDescription("Returns the error it is asked for: its type, message, retryable flag, partial side "+
			"effects and retry-after. Type PANIC makes the tool panic instead. Useful to test error mapping and retries."),
		tool.WithCategory(toolwirev1.ToolCategory_TOOL_CATEGORY_UTILITY),
		tool.Destructive(false), tool.OpenWorld(false),
	))
}

// fail never succeeds: it returns the *tool.Error that in describes,
// or a VALIDATION error when in describes none.
func fail(_ context.Context, in FailInput) (*tool.Result, error) {
	name := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(in.Type)), "ERROR_TYPE_")
	if name == "PANIC" {
		panic("fail: " + cmp.Or(in.Message, "panic requested"))
	}
	typ := toolwirev1.ErrorType(toolwirev1.ErrorType_value["ERROR_TYPE_"+name])
	if typ == toolwirev1.ErrorType_ERROR_TYPE_UNSPECIFIED {
		return nil, tool.InvalidArgument("/type", "unknown error type "+strconv.Quote(in.Type)+"; want an ErrorType name such as TRANSIENT, or PANIC")
	}
	sideEffects, ok := parseSideEffects(in.SideEffects)
	if !ok {
		return nil, tool.InvalidArgument("/side_effects", "unknown value "+strconv.Quote(in.SideEffects)+"; want none, possible or unknown")
	}
	var retryAfter time.Duration
	if in.RetryAfter != "" {
		d, err := time.ParseDuration(in.RetryAfter)
		if err != nil || d < 0 {
			return nil, tool.InvalidArgument("/retry_after", "not a non-negative Go duration such as 2s")
		}
		retryAfter = d
	}

	err := tool.Errorf(typ, "%s", cmp.Or(in.Message, "failure requested from the fail tool"))
	if in.Retryable != nil {
		err.Retryable = *in.Retryable
	}
	err.SideEffects = sideEffects
	err.RetryAfter = retryAfter
	return nil, err
}

// parseSideEffects accepts "none", "possible" and "unknown" in any case,
// with or without the PARTIAL_SIDE_EFFECTS_ prefix; "" is unspecified.
func parseSideEffects(s string) (toolwirev1.PartialSideEffects, bool) {
	if s == "" {
		return toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNSPECIFIED, true
	}
	name := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "PARTIAL_SIDE_EFFECTS_")
	v, ok := toolwirev1.PartialSideEffects_value["PARTIAL_SIDE_EFFECTS_"+name]
	if !ok || v == int32(toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNSPECIFIED) {
		return 0, false
	}
	return toolwirev1.PartialSideEffects(v), true
}
