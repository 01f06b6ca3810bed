package audit

import (
	"github.com/toolwire/toolwire/internal/redact"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// SecretKeyword marks a property of a tool's input schema as secret:
// {"type": "string", "x-toolwire-secret": true}. Its value is replaced by
// Redacted in every audit output (records, exports, replay diffs).
const SecretKeyword = redact.Keyword

// Redacted replaces secret values.
const Redacted = redact.Redacted

// redactRecord fills rec's shown arguments and redacts its response (the
// terminal response, and rec.Response built from it) by the input schema
// of the call's spec version: the argument fields it marks secret are
// replaced, and their values wherever they occur in the response's text.
// Without a schema (known is false: the version left the registry) the
// arguments are replaced whole and every argument value counts as secret.
func redactRecord(rec *Record, schema string, known bool) *redact.Secrets {
	args := rec.Call.GetArguments()
	var sec *redact.Secrets
	if known {
		plan := redact.Compile(schema)
		rec.Arguments = plan.Arguments(args)
		sec = plan.Secrets(args)
	} else {
		rec.Arguments = []byte(`"` + Redacted + `"`)
		sec = redact.AllOf(args)
	}
	return sec
}

// redactResponse redacts resp in place and returns its protobuf JSON.
func redactResponse(sec *redact.Secrets, resp *toolwirev1.ToolResponse) []byte {
	sec.Response(resp)
	b, _ := protojson.Marshal(resp)
	return b
}

// redactEvent decodes an event, redacts it and returns its protobuf JSON;
// ok is false for an undecodable event.
func redactEvent(sec *redact.Secrets, data []byte) (b []byte, ok bool) {
	ev := &toolwirev1.CallEvent{}
	if proto.Unmarshal(data, ev) != nil {
		return nil, false
	}
	sec.Event(ev)
	b, _ = protojson.Marshal(ev)
	return b, true
}
