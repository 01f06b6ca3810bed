package audit_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/signing"
)

// A record's signature over a batch of results checks offline from the
// record alone, and fails with another record's path or attempt.
func TestBatchSignatureChecksOffline(t *testing.T) {
	k, err := signing.NewKey()
	require.NoError(t, err)
	var batched *audit.Signature
	deadline := time.Now().Add(time.Minute)
	for batched == nil && time.Now().Before(deadline) {
		// Concurrent signers: those that arrive while a signature is
		// being made are signed together.
		const n = 32
		headers := make([]nats.Header, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { headers[i] = k.Sign(nil, signing.KindResult, fmt.Sprintf("call-%d", i), 2, []byte{byte(i)}) })
		}
		wg.Wait()
		for i, h := range headers {
			if h.Get(signing.HeaderBatch) == "" {
				continue
			}
			sum := sha256.Sum256([]byte{byte(i)})
			batched = &audit.Signature{Signer: k.Public(), Signature: h.Get(signing.HeaderSignature), Batch: h.Get(signing.HeaderBatch),
				Kind: signing.KindResult, CallID: fmt.Sprintf("call-%d", i), Attempt: 2, SHA256: hex.EncodeToString(sum[:])}
			break
		}
	}
	require.NotNil(t, batched, "no batch signed in a minute of concurrent signing")
	require.NoError(t, batched.Check())
	other := *batched
	other.Attempt = 1
	require.Error(t, other.Check(), "another attempt")
	other = *batched
	other.Batch = ""
	require.Error(t, other.Check(), "without its path")
}
