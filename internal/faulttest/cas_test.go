package faulttest_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/faulttest"
)

// Concurrent compare-and-set writes of one key on a replicated (R3)
// bucket: every loser is recognised as a lost compare-and-set
// (bus.IsCASConflict), whichever error code the cluster gives it.
func TestCASConflictsOnAReplicatedBucket(t *testing.T) {
	c := faulttest.NewCluster3(t)
	kv := c.Bus.Tasks
	won, lost := 0, 0
	for round := range 10 {
		key := fmt.Sprintf("acme.task%04d", round)
		rev, err := kv.Create(t.Context(), key, []byte("{}"))
		require.NoError(t, err)
		_, err = kv.Create(t.Context(), key, []byte("{}"))
		require.True(t, bus.IsCASConflict(err), "a second create: %v", err)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range 8 {
			wg.Go(func() {
				_, err := kv.Update(t.Context(), key, []byte(fmt.Sprint(i)), rev)
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					won++
					return
				}
				lost++
				assert.True(t, bus.IsCASConflict(err), "a losing update: %v", err)
			})
		}
		wg.Wait()
	}
	require.Equal(t, 10, won, "one writer wins each round")
	t.Logf("%d lost compare-and-sets, all recognised", lost)
}
