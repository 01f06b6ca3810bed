package limits

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A run stored by a version that saw only repeats of one call (version 1)
// goes on after an upgrade; the value written back is version 2.
func TestLoopValueOfVersion1GoesOn(t *testing.T) {
	var fp [32]byte
	fp[0] = 7
	now := time.Now().UnixNano()
	v1 := append([]byte{1}, fp[:]...)
	v1 = binary.BigEndian.AppendUint32(v1, 4)
	v1 = binary.BigEndian.AppendUint64(v1, uint64(now))
	var st loopState
	require.NoError(t, st.reset(v1))
	txn := &repeatTxn{fp: fp, now: now + int64(time.Second), window: int64(time.Minute)}
	require.True(t, txn.apply(&st))
	require.Equal(t, Run{Count: 5, Period: 1}, txn.run)
	b := st.marshal(nil)
	require.Len(t, b, loopStateSize)
	var back loopState
	require.NoError(t, back.reset(b))
	back.window = st.window
	require.Equal(t, st, back)
	require.Error(t, back.reset(b[:len(b)-1]))
	require.Error(t, back.reset(append([]byte{9}, b[1:]...)))
}
