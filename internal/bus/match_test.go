package bus_test

import (
	"testing"

	"github.com/toolwire/toolwire/internal/bus"
)

func TestSubjectMatches(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		filter, subject string
		want            bool
	}{
		{"a.b.c", "a.b.c", true},
		{"a.b.c", "a.b", false},
		{"a.b", "a.b.c", false},
		{"a.*.c", "a.x.c", true},
		{"a.*.c", "a.x.y", false},
		{"a.>", "a.b", true},
		{"a.>", "a.b.c.d", true},
		{"a.>", "a", false},
		{">", "a", true},
		{"*", "a.b", false},
		{"toolwire.shadow.native.*.builtin.echo", "toolwire.shadow.native.acme.builtin.echo", true},
		{"toolwire.shadow.native.>", "toolwire.call.native.acme.builtin.echo", false},
	} {
		if got := bus.SubjectMatches(c.filter, c.subject); got != c.want {
			t.Errorf("SubjectMatches(%q, %q) = %v, want %v", c.filter, c.subject, got, c.want)
		}
	}
}
