package dashboard

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/callindex"
)

// A live batch keeps the newest update of each call, at most its bound of
// calls (those updated last), oldest first, and holds O(bound) however
// many updates come between two flushes.
func TestLiveBatchCoalesces(t *testing.T) {
	t.Parallel()
	b := newLiveBatch(3)
	require.Empty(t, b.take())
	b.add(callindex.Entry{ID: "a", Outcome: "pending"})
	b.add(callindex.Entry{ID: "b", Outcome: "pending"})
	b.add(callindex.Entry{ID: "a", Outcome: "ok"})
	got := b.take()
	require.Equal(t, []callindex.Entry{{ID: "b", Outcome: "pending"}, {ID: "a", Outcome: "ok"}}, got, "a's newest, after b")
	require.Empty(t, b.take(), "taken")

	for i := range 1000 {
		b.add(callindex.Entry{ID: fmt.Sprint(i)})
		require.LessOrEqual(t, len(b.calls), 6, "at most twice the bound between flushes")
	}
	got = b.take()
	require.Equal(t, []string{"997", "998", "999"}, []string{got[0].ID, got[1].ID, got[2].ID})
	require.Len(t, got, 3)
}
