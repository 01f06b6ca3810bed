package toolctl

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/capacity"
)

// The account's messages are not counted: shown as unknown, never as 0.
func TestStoreAccountMessages(t *testing.T) {
	t.Parallel()
	st := capacity.Compute(capacity.Sample{}, capacity.Sample{Stores: []capacity.Reading{
		{Name: "calls", Bytes: 10, Messages: 2, MaxBytes: 100, MaxMessages: -1},
		{Name: capacity.AccountStore, Stream: "(account)", Bytes: 10, MaxBytes: 1000, MaxMessages: -1, RefusesCalls: true},
	}}, 0)
	require.Equal(t, "2", messages(st[0]))
	require.Equal(t, "-", messages(st[1]))
	require.NotNil(t, storeJSON(st[0]).Messages)
	require.Nil(t, storeJSON(st[1]).Messages)
	require.EqualValues(t, 900, *storeJSON(st[1]).FullAtBytes)
}
