package toolctl

import (
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/audit"
)

// A call looked up by id alone reads around the time in its id; a range
// given is kept, and an id that is not a ULID bounds nothing.
func TestCallIDBoundsTheRange(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	id := ulid.MustNew(ulid.Timestamp(at), ulid.DefaultEntropy()).String()

	f := audit.Filter{CallID: id}
	byCallIDTime(&f)
	require.Equal(t, at.Add(-time.Minute), f.Since.UTC())
	require.Equal(t, at.Add(callIDReach), f.Until.UTC())

	since := at.Add(-48 * time.Hour)
	g := audit.Filter{CallID: id, Since: since}
	byCallIDTime(&g)
	require.Equal(t, since, g.Since)
	require.True(t, g.Until.IsZero(), "a range given is the operator's")

	h := audit.Filter{CallID: "not-a-ulid"}
	byCallIDTime(&h)
	require.True(t, h.Since.IsZero() && h.Until.IsZero())
}
