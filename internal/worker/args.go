package worker

import (
	"fmt"

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
	if d := JSONDepth(args, maxDepth); d > maxDepth {
		return fmt.Sprintf("arguments nest deeper than the limit of %d", maxDepth)
	}
	return ""
}

// JSONDepth returns the deepest nesting of objects and arrays in b,
// stopping once it passes limit. It does not validate the JSON; it keeps
// deep documents away from decoders.
func JSONDepth(b []byte, limit int) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > limit {
					return deepest
				}
			}
		case '}', ']':
			depth--
		}
	}
	return deepest
}
