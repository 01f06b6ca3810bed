package worker

import (
	"fmt"
	"strings"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// checkArgs repeats the dispatcher's checks of a call's arguments: the
// size and depth limits, then the input schema of the spec version the
// worker serves (compiled once per version). A call published around the
// dispatcher must not reach a tool unchecked. It returns the VALIDATION
// error to refuse the call with, or nil.
func checkArgs(args []byte, ent *registry.Entry, cfg Config) *toolwirev1.ToolError {
	maxBytes, maxDepth := cfg.MaxArgsBytes, cfg.MaxArgsDepth
	if l := ent.Spec.GetLimits(); l != nil {
		if l.MaxArgsBytes > 0 {
			maxBytes = l.MaxArgsBytes
		}
		if l.MaxArgsDepth > 0 {
			maxDepth = int(l.MaxArgsDepth)
		}
	}
	if int64(len(args)) > maxBytes {
		return envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_VALIDATION,
			fmt.Sprintf("arguments are %d bytes, over the limit of %d", len(args), maxBytes))
	}
	if d := registry.JSONDepth(args, maxDepth); d > maxDepth {
		return envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_VALIDATION,
			fmt.Sprintf("arguments nest deeper than the limit of %d", maxDepth))
	}
	vs := registry.ValidateArgs(ent.Input, args)
	if len(vs) == 0 {
		return nil
	}
	parts := make([]string, 0, len(vs))
	for _, v := range vs {
		field := strings.TrimPrefix(v.Field, "/")
		if v.Field == "" {
			field = "(root)"
		}
		parts = append(parts, field+": "+v.Message)
	}
	te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, "invalid arguments: "+strings.Join(parts, "; "))
	te.Violations = vs
	return te
}
