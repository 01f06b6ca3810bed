package limits

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
)

// Plain tokens reach the bucket key as they are; anything else is hashed,
// so no input reaches another key, adds a token, or grows the key.
func TestBucketKeyHashesWhatIsNotPlain(t *testing.T) {
	t.Parallel()
	valid := regexp.MustCompile(`^[-_=A-Za-z0-9]+(\.[-_=A-Za-z0-9]+)*$`)
	k, err := Key{Tenant: "acme", Limit: "per-session", Value: "sess_42"}.bucketKey(kindBudget)
	require.NoError(t, err)
	require.Equal(t, "budget.acme.per-session.sess_42", k)

	seen := map[string]string{}
	for _, v := range []string{"", "a", "a.b", "a_b", "a>b", "a*", "a b", "é", strings.Repeat("x", 128), strings.Repeat("x", 129),
		"=abc", "$KV.x", "a\x00b", strings.Repeat("y", MaxInputBytes)} {
		k, err := Key{Tenant: "acme", Limit: "l", Value: v}.bucketKey(kindRate)
		require.NoError(t, err, "%q", v)
		require.Regexp(t, valid, k)
		require.LessOrEqual(t, len(k), MaxKeyLen)
		require.Len(t, strings.Split(k, "."), 4, k)
		if prev, dup := seen[k]; dup {
			t.Fatalf("%q and %q share the key %s", prev, v, k)
		}
		seen[k] = v
	}
	k, err = Key{Tenant: "acme", Limit: "a rule: with spaces", Value: "v"}.bucketKey(kindLoop)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(k, "loop.acme.="), k)
	require.LessOrEqual(t, len(windowKey(k, 1<<62)), MaxKeyLen)
}

// The bus layout's limits bucket takes the largest value the store writes,
// with room for a write's headers.
func TestBusBucketHoldsTheLargestValue(t *testing.T) {
	if got, want := bus.LimitsValueBytes, MaxValueBytes+headerBytes; got < want {
		t.Fatalf("bus.LimitsValueBytes %d < %d", got, want)
	}
}
