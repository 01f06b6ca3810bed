package client

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// argumentsJSON renders a call's arguments as the exact JSON text sent in
// CallRequest.arguments_json. nil is no arguments (the dispatcher reads
// {}); json.RawMessage, []byte and string are already JSON and sent byte
// for byte; anything else is encoded with encoding/json (without HTML
// escaping). The protobuf Struct field is never used: it carries numbers
// as float64 and would round big integers.
func argumentsJSON(args any) (string, error) {
	switch v := args.(type) {
	case nil:
		return "", nil
	case json.RawMessage:
		return string(v), nil
	case []byte:
		return string(v), nil
	case string:
		return v, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(args); err != nil {
		return "", fmt.Errorf("encode arguments: %w", err)
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}
