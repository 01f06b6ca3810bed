package mcp

import (
	"encoding/json"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Keys of the `_meta` conventions of results (see the package doc).
const (
	// MetaIntents is the result `_meta` key carrying intents:
	// [{"type": "...", "payload": <any JSON>}, ...].
	MetaIntents = "toolwire/intents"
	// MetaError is the `_meta` key of an isError result that types the
	// error: {"type": "RATE_LIMIT", "retryable": true, "sideEffects":
	// "NONE", "retryAfterMs": 2000, "suggestion": "..."}; every field
	// optional.
	MetaError = "toolwire/error"
)

// metaIntent is one element of MetaIntents.
type metaIntent struct {
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// intentsFromMeta decodes MetaIntents into intents with ids i1, i2, ...
func intentsFromMeta(m sdk.Meta) ([]*toolwirev1.Intent, error) {
	raw, ok := m[MetaIntents]
	if !ok || raw == nil {
		return nil, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var list []metaIntent
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("_meta[%q] must be an array of {type, payload}: %w", MetaIntents, err)
	}
	out := make([]*toolwirev1.Intent, 0, len(list))
	for i, in := range list {
		if in.Type == "" {
			return nil, fmt.Errorf("_meta[%q][%d]: empty type", MetaIntents, i)
		}
		var payload string
		if len(in.Payload) > 0 && string(in.Payload) != "null" {
			payload = string(in.Payload)
		}
		out = append(out, &toolwirev1.Intent{Id: fmt.Sprintf("i%d", i+1), Type: in.Type, PayloadJson: payload})
	}
	return out, nil
}

// metaError is the value of MetaError.
type metaError struct {
	Type         string `json:"type"`
	Retryable    *bool  `json:"retryable"`
	SideEffects  string `json:"sideEffects"`
	RetryAfterMs int64  `json:"retryAfterMs"`
	Suggestion   string `json:"suggestion"`
}

func (me metaError) retryAfter() time.Duration {
	return time.Duration(me.RetryAfterMs) * time.Millisecond
}
