package audit

import (
	"strings"
	"testing"
)

func TestRedactFailsClosed(t *testing.T) {
	t.Parallel()
	var r redactor
	args := []byte(`{"user":"ann","password":"hunter2","n":12345678901234567890}`)
	cases := []struct {
		name, schema string
		wantWhole    bool
	}{
		{"Properties", `{"type":"object","properties":{"password":{"type":"string","x-toolwire-secret":true}}}`, false},
		{"Ref", `{"type":"object","$defs":{"pw":{"type":"string","x-toolwire-secret":true}},"properties":{"password":{"$ref":"#/$defs/pw"}}}`, true},
		{"AllOf", `{"allOf":[{"type":"object","properties":{"password":{"x-toolwire-secret":true}}}]}`, true},
	}
	for _, c := range cases {
		got := string(r.redact(c.schema, args))
		if strings.Contains(got, "hunter2") {
			t.Errorf("%s: the secret is shown: %s", c.name, got)
		}
		if whole := got == string(redactedWhole); whole != c.wantWhole {
			t.Errorf("%s: redacted whole = %v, want %v (%s)", c.name, whole, c.wantWhole, got)
		}
		if !c.wantWhole && (!strings.Contains(got, `"ann"`) || !strings.Contains(got, "12345678901234567890")) {
			t.Errorf("%s: other values changed: %s", c.name, got)
		}
	}
}
