package signing

import (
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// Every leaf of trees of every shape up to a full batch proves its way to
// the root, and nothing else does.
func TestMerkleProofs(t *testing.T) {
	for n := 2; n <= maxBatch; n += 1 + n/16 {
		leaves := make([]digest, n)
		statements := make([][]byte, n)
		for i := range leaves {
			statements[i] = fmt.Appendf(nil, "statement %d of %d", i, n)
			leaves[i] = leafHash(statements[i])
		}
		root, proofs := merkle(leaves)
		for i := range leaves {
			header := fmt.Sprintf("%d/%d %s", i, n, base64.StdEncoding.EncodeToString(proofs[i]))
			got, count, ok := batchRoot(header, statements[i])
			require.True(t, ok, "leaf %d of %d", i, n)
			require.Equal(t, root, got, "leaf %d of %d", i, n)
			require.Equal(t, n, count)
			other := statements[(i+1)%n]
			if got, _, ok := batchRoot(header, other); ok && got == root {
				t.Fatalf("leaf %d of %d: another statement proves with its path", i, n)
			}
		}
	}
}

func TestBatchHeaderRefusesMalformed(t *testing.T) {
	for _, h := range []string{"", "1/2", "0/1 ", "2/2 AAAA", "-1/3 AAAA", "0/300 AAAA", "0/2 not-base64!", "0/2 AAAA", "x/2 AAAA"} {
		_, _, ok := batchRoot(h, []byte("s"))
		require.False(t, ok, "%q", h)
	}
}

// Statements that arrive while a signature is being made are signed
// together next: one signature, each message verifiable alone, by a
// third party too, and no message verifies with another's proof.
func TestSignaturesBatchUnderLoad(t *testing.T) {
	k, err := NewKey()
	require.NoError(t, err)
	k.batch.busy = true // a signature is being made
	const n = 37
	headers := make([]nats.Header, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { headers[i] = k.Sign(nil, KindResult, fmt.Sprintf("call-%d", i), 1, []byte("payload")) })
	}
	require.Eventually(t, func() bool {
		k.batch.mu.Lock()
		defer k.batch.mu.Unlock()
		return k.batch.open != nil && len(k.batch.open.statements) == n
	}, 30*time.Second, time.Millisecond)
	k.batch.finish() // the signature in progress is done
	wg.Wait()
	ring := &Keyring{verified: map[string]verifiedSig{}}
	for i, h := range headers {
		require.Equal(t, headers[0].Get(HeaderSignature), h.Get(HeaderSignature), "one signature covers the batch")
		require.True(t, strings.HasSuffix(strings.Fields(h.Get(HeaderBatch))[0], fmt.Sprintf("/%d", n)), h.Get(HeaderBatch))
		signer, p := VerifySignature(h, KindResult, fmt.Sprintf("call-%d", i), 1, []byte("payload"))
		require.Empty(t, p)
		require.Equal(t, k.Public(), signer)
		_, p = ring.verify(h, Statement(KindResult, fmt.Sprintf("call-%d", i), 1, []byte("payload")))
		require.Empty(t, p)
		_, p = ring.verify(h, Statement(KindResult, fmt.Sprintf("call-%d", i), 2, []byte("payload")))
		require.Equal(t, Forged, p, "another attempt")
		_, p = ring.verify(h, Statement(KindResult, fmt.Sprintf("call-%d", (i+1)%n), 1, []byte("payload")))
		require.Equal(t, Forged, p, "another call with this message's proof")
	}
	require.Len(t, ring.verified, 1, "the batch's signature is verified once")
	k.batch.mu.Lock()
	defer k.batch.mu.Unlock()
	require.False(t, k.batch.busy, "idle again")
	require.Nil(t, k.batch.open)
}

// Many signers at once: every signature verifies, whether it was made
// alone or in a batch, and the batcher ends idle.
func TestConcurrentSigning(t *testing.T) {
	k, err := NewKey()
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				id := fmt.Sprintf("call-%d-%d", g, i)
				h := k.Sign(nil, KindEvent, id, 1, []byte(id))
				if _, p := VerifySignature(h, KindEvent, id, 1, []byte(id)); p != "" {
					t.Errorf("%s: %s (batch %q)", id, p, h.Get(HeaderBatch))
				}
			}
		})
	}
	wg.Wait()
	require.False(t, k.batch.busy)
	require.Nil(t, k.batch.open)
}

// A verifier's cost per message of a batch it has verified once: the
// statement, the leaf's path and the cache.
func BenchmarkVerifyBatchedMessage(b *testing.B) {
	k, _ := NewKey()
	k.batch.busy = true
	const n = 16
	headers := make([]nats.Header, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { headers[i] = k.Sign(nil, KindResult, fmt.Sprintf("call-%d", i), 1, make([]byte, 200)) })
	}
	for {
		k.batch.mu.Lock()
		full := k.batch.open != nil && len(k.batch.open.statements) == n
		k.batch.mu.Unlock()
		if full {
			break
		}
		time.Sleep(time.Millisecond)
	}
	k.batch.finish()
	wg.Wait()
	ring := &Keyring{verified: map[string]verifiedSig{}}
	payload := make([]byte, 200)
	i := 0
	for b.Loop() {
		if _, p := ring.verify(headers[i%n], Statement(KindResult, fmt.Sprintf("call-%d", i%n), 1, payload)); p != "" {
			b.Fatal(p)
		}
		i++
	}
}

// A signer's cost per message with many signing at once.
func BenchmarkSignConcurrent(b *testing.B) {
	k, _ := NewKey()
	payload := make([]byte, 200)
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k.Sign(nil, KindResult, "01M8JDSPCWZTYBHYDA93R972BW", 1, payload)
		}
	})
}

// A group as large as the largest recent one is signed at once, without
// waiting out the Gap: a caller with 4 calls in flight gets its 4 results
// signed as soon as all 4 are there. One fewer waits (here: the Gap is
// an hour away, so only the early path can sign it).
func TestGroupSignedWhenAsLargeAsRecentOnes(t *testing.T) {
	k, err := NewKey()
	require.NoError(t, err)
	b := &k.batch
	b.mu.Lock()
	b.recent = [recentGroups]int{4, 2, 3}
	b.next = 3 // not a probe
	b.concurrent = time.Now()
	b.last = time.Now().Add(time.Hour) // the next Gap ends in an hour
	b.mu.Unlock()
	var wg sync.WaitGroup
	done := make(chan int, 4)
	sign := func(i int) {
		wg.Go(func() {
			k.Sign(nil, KindResult, fmt.Sprintf("call-%d", i), 1, []byte("payload"))
			done <- i
		})
	}
	for i := range 3 {
		sign(i)
	}
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.open != nil && len(b.open.statements) == 3
	}, 30*time.Second, time.Millisecond)
	require.Empty(t, done, "3 of the 4 recent signers wait")
	sign(3)
	wg.Wait()
	require.Len(t, done, 4)
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Contains(t, b.recent, 4)
	require.False(t, b.busy)
	require.Nil(t, b.open)
}

// Every recentGroups-th group is a probe, never signed early, so the size
// at which groups are signed early can grow with what arrives within a
// Gap; the others are signed as soon as they are as large as the recent
// largest.
func TestProbeGroupWaitsOutTheGap(t *testing.T) {
	var b batcher
	b.recent = [recentGroups]int{6, 5}
	for next := range recentGroups {
		b.next = next
		require.Equal(t, next != 0, b.enough(6), "group %d of the ring", next)
		require.False(t, b.enough(5))
	}
}
