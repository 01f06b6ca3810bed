package dispatch

import (
	"fmt"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// argumentBytes returns the exact JSON of the call's arguments: the raw
// string when given (byte for byte), else the encoded object, else {}.
func argumentBytes(o *toolwirev1.CallRequest) ([]byte, error) {
	if o.ArgumentsJson != "" {
		return []byte(o.ArgumentsJson), nil
	}
	if o.Arguments != nil {
		b, err := protojson.Marshal(o.Arguments)
		if err != nil {
			return nil, fmt.Errorf("arguments: %w", err)
		}
		return b, nil
	}
	return []byte("{}"), nil
}

// jsonDepth returns the deepest nesting of objects and arrays in b,
// stopping early once it passes limit. It does not validate the JSON (the
// schema check does); it only keeps deep documents away from decoders.
func jsonDepth(b []byte, limit int) int {
	depth, max := 0, 0
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
			if depth > max {
				max = depth
				if max > limit {
					return max
				}
			}
		case '}', ']':
			depth--
		}
	}
	return max
}
