package toolctl_test

import (
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/toolctl"
)

// tenantKeys: a bot of acme, and beta's admin.
var tenantKeys = policyAuth{
	"acme-bot":   {Tenant: "acme", Agent: "bot", Scopes: []string{"tools"}},
	"beta-admin": {Tenant: "beta", Agent: "ops", Scopes: []string{"*"}},
}

// Through toolctl another tenant's call answers exactly as an id nobody
// minted does — get, output, watch and cancel alike, exit code and text —
// and never "pending" (issue 28, finding 5).
func TestAnotherTenantsCallIsAMadeUpIDToToolctl(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{Auth: tenantKeys})
	o := b.policyAs(t, "acme-bot", "call", "echo", `{"text":"hi"}`)
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	acmeCall := strings.TrimSpace(strings.TrimPrefix(o.stderr, "call: "))
	require.Len(t, acmeCall, 26, o.stderr)

	answers := func(id string) []string {
		var out []string
		for _, args := range [][]string{{"get", id}, {"get", id, "--wait", "2s"}, {"output", id}, {"watch", id}, {"cancel", id}} {
			o := b.policyAs(t, "beta-admin", args...)
			out = append(out, strings.Join(args[:1], " ")+": "+string(rune('0'+o.code))+" "+strings.ReplaceAll(o.stdout+o.stderr, id, "ID"))
		}
		return out
	}
	madeUp := answers(ulid.Make().String())
	for _, a := range madeUp {
		t.Log(a)
		require.NotContains(t, a, "pending", a)
	}
	require.Equal(t, madeUp, answers(acmeCall))
	o = b.policyAs(t, "acme-bot", "get", acmeCall)
	require.Equal(t, toolctl.ExitOK, o.code, "the owner gets it: %s", o.stderr)
}
