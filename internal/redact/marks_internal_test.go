package redact

import (
	"strings"
	"testing"
)

// Marks the plan follows completely never make it fail closed: the keyword
// set to false, a secret object whose children are marked too, the keyword
// in a description. A mark it cannot follow ($ref, allOf) still does.
func TestOrdinaryMarksDoNotFailClosed(t *testing.T) {
	args := []byte(`{"token":"s3cr3t-value","creds":{"password":"pw-123456"},"city":"Lisbon"}`)
	for _, schema := range []string{
		`{"type":"object","properties":{"token":{"type":"string","x-toolwire-secret":true},"city":{"type":"string","x-toolwire-secret":false}}}`,
		`{"type":"object","properties":{"creds":{"type":"object","x-toolwire-secret":true,"properties":{"password":{"type":"string","x-toolwire-secret":true}}},"city":{"type":"string"}}}`,
		`{"type":"object","description":"values marked x-toolwire-secret are hidden","properties":{"token":{"type":"string","x-toolwire-secret":true},"city":{"type":"string"}}}`,
	} {
		p := Compile(schema)
		if !p.complete {
			t.Errorf("incomplete plan for %s", schema)
		}
		if got := p.Secrets(args).String("weather in Lisbon: sunny"); got != "weather in Lisbon: sunny" {
			t.Errorf("%s: an ordinary value was redacted: %q", schema, got)
		}
		if got := string(p.Arguments(args)); !strings.Contains(got, `"city":"Lisbon"`) {
			t.Errorf("%s: arguments: %s", schema, got)
		}
	}
	for _, schema := range []string{
		`{"type":"object","$defs":{"t":{"type":"string","x-toolwire-secret":true}},"properties":{"token":{"$ref":"#/$defs/t"}}}`,
		`{"allOf":[{"properties":{"token":{"type":"string","x-toolwire-secret":true}}}]}`,
		`not json but x-toolwire-secret`,
	} {
		if Compile(schema).complete {
			t.Errorf("a mark the plan cannot follow must fail closed: %s", schema)
		}
	}
}
