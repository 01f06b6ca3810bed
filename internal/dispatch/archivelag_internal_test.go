package dispatch

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A stream whose lag cannot be read keeps its last value for a few
// reads, then its lag is unknown: not exported and not refused on
// (fail-open), until a read succeeds again. A longer MaxAge kept from
// before the archive (no hold mark) is not measured.
func TestArchiveLagUnreadIsUnknown(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	l := &archiveLag{d: &Dispatcher{log: slog.New(slog.DiscardHandler)}, margin: time.Minute,
		streams: []lagStream{{name: "CALLS", window: 4 * time.Hour}}}
	behind := lagState{oldest: time.Now().Add(-4 * time.Hour), maxAge: 4 * time.Hour, measured: true}
	l.state, l.failed = map[string]lagState{"CALLS": behind}, map[string]int{}
	te, _, _ := l.refusal(ctx)
	require.NotNil(t, te, "within the margin of the MaxAge: refused")

	for range archiveLagUnknownAfter - 1 {
		l.failedRead(ctx, "CALLS", errors.New("read failed"))
	}
	te, _, _ = l.refusal(ctx)
	require.NotNil(t, te, "a read or two failing keeps the last value")
	l.failedRead(ctx, "CALLS", errors.New("read failed"))
	te, _, _ = l.refusal(ctx)
	require.Nil(t, te, "unknown: not refused on")
	require.Empty(t, l.lags(), "unknown: not exported")

	kept := lagState{oldest: time.Now().Add(-700 * time.Hour), maxAge: 720 * time.Hour}
	l.state["CALLS"] = kept
	te, _, _ = l.refusal(ctx)
	require.Nil(t, te, "a MaxAge kept from before the archive is not measured")
}
