package worker

import (
	"fmt"

	"github.com/toolwire/toolwire/internal/registry"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// checkArgs repeats the dispatcher's size and depth limits: a call
// published around the dispatcher must not reach a tool unchecked.
func checkArgs(args []byte, spec *toolwirev1.ToolSpec, cfg Config) string {
	maxBytes, maxDepth := cfg.MaxArgsBytes, cfg.MaxArgsDepth
	if l := spec.GetLimits(); l != nil {
		if l.MaxArgsBytes > 0 {
			maxBytes = l.MaxArgsBytes
		}
		if l.MaxArgsDepth > 0 {
			maxDepth = int(l.MaxArgsDepth)
		}
	}
	if int64(len(args)) > maxBytes {
		return fmt.Sprintf("arguments are %d bytes, over the limit of %d", len(args), maxBytes)
	}
	if d := registry.JSONDepth(args, maxDepth); d > maxDepth {
		return fmt.Sprintf("arguments nest deeper than the limit of %d", maxDepth)
	}
	return ""
}
