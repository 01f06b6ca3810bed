package api

import (
	"errors"
	"fmt"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
)

// Each pool refusal has its code: an overlapped pause is an answer
// (aborted, toolctl exit 1), not an outage (unavailable, "is a dispatcher
// serving?").
func TestPoolErrorCodes(t *testing.T) {
	for err, want := range map[error]connect.Code{
		dispatch.ErrPauseScope:                          connect.CodePermissionDenied,
		fmt.Errorf("pool x: %w", dispatch.ErrNoPool):    connect.CodeNotFound,
		dispatch.ErrPauseReason:                         connect.CodeInvalidArgument,
		fmt.Errorf("pause: %w", bus.ErrPauseOverlapped): connect.CodeAborted,
		errors.New("nats: timeout"):                     connect.CodeUnavailable,
	} {
		require.Equal(t, want, connect.CodeOf(poolError(err)), "%v", err)
	}
}
