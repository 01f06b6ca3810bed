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
