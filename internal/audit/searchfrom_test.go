package audit_test

import (
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/audit"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The archive is searched for a call's messages from a minute before the
// call was stored; for a call that waited for an approval (stored when it
// was approved), from a minute before its id was minted (when it was
// parked, and its AWAITING_APPROVAL stored), at most 30 days back.
func TestArchiveSearchStartsWhenAnApprovedCallWasParked(t *testing.T) {
	t.Parallel()
	stored := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	id := func(at time.Time) string { return ulid.MustNew(ulid.Timestamp(at), ulid.DefaultEntropy()).String() }
	parked := stored.Add(-2 * time.Hour)
	plain := &toolwirev1.ToolCall{CallId: id(parked)}
	require.Equal(t, stored.Add(-time.Minute), audit.SearchFrom(plain, stored), "a call that did not wait")
	approved := &toolwirev1.ToolCall{CallId: id(parked), ApprovalId: "a"}
	require.Equal(t, parked.Add(-time.Minute), audit.SearchFrom(approved, stored))
	ancient := &toolwirev1.ToolCall{CallId: id(stored.Add(-365 * 24 * time.Hour)), ApprovalId: "a"}
	require.Equal(t, stored.Add(-720*time.Hour-time.Minute), audit.SearchFrom(ancient, stored), "bounded")
	later := &toolwirev1.ToolCall{CallId: id(stored.Add(time.Hour)), ApprovalId: "a"}
	require.Equal(t, stored.Add(-time.Minute), audit.SearchFrom(later, stored), "a clock ahead changes nothing")
	require.Equal(t, stored.Add(-time.Minute), audit.SearchFrom(&toolwirev1.ToolCall{CallId: "not-a-ulid", ApprovalId: "a"}, stored))
}
