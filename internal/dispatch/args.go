package dispatch

import (
	"errors"
	"fmt"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// errBothArgumentForms refuses a request that carries arguments twice:
// whichever form won, the caller could not tell which one ran.
var errBothArgumentForms = errors.New("arguments and arguments_json are both set; send one of them")

// argumentBytes returns the exact JSON of the call's arguments: the raw
// string when given (byte for byte), else the encoded object, else {}. A
// request with both forms is refused.
func argumentBytes(o *toolwirev1.CallRequest) ([]byte, error) {
	if o.ArgumentsJson != "" {
		if o.Arguments != nil {
			return nil, errBothArgumentForms
		}
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
