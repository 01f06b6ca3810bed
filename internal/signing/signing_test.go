package signing_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/signing"
)

// A signature verifies over its own statement only: another payload,
// call, attempt or kind is a forgery, and no headers are unsigned.
func TestSignaturesCoverTheirStatement(t *testing.T) {
	t.Parallel()
	k, err := signing.NewKey()
	require.NoError(t, err)
	payload := []byte("the stored bytes")
	h := k.Sign(nil, signing.KindResult, "call-1", 1, payload)
	signer, p := signing.VerifySignature(h, signing.KindResult, "call-1", 1, payload)
	require.Empty(t, p)
	require.Equal(t, k.Public(), signer)
	for name, check := range map[string]func() signing.Problem{
		"payload": func() signing.Problem {
			_, p := signing.VerifySignature(h, signing.KindResult, "call-1", 1, []byte("other"))
			return p
		},
		"call": func() signing.Problem {
			_, p := signing.VerifySignature(h, signing.KindResult, "call-2", 1, payload)
			return p
		},
		"attempt": func() signing.Problem {
			_, p := signing.VerifySignature(h, signing.KindResult, "call-1", 2, payload)
			return p
		},
		"kind": func() signing.Problem {
			_, p := signing.VerifySignature(h, signing.KindEvent, "call-1", 1, payload)
			return p
		},
		"signer": func() signing.Problem {
			other, _ := signing.NewKey()
			hh := nats.Header{signing.HeaderSigner: {other.Public()}, signing.HeaderSignature: h.Values(signing.HeaderSignature)}
			_, p := signing.VerifySignature(hh, signing.KindResult, "call-1", 1, payload)
			return p
		},
		"garbage": func() signing.Problem {
			hh := nats.Header{signing.HeaderSigner: {"not a key"}, signing.HeaderSignature: {"!!"}}
			_, p := signing.VerifySignature(hh, signing.KindResult, "call-1", 1, payload)
			return p
		},
	} {
		require.Equal(t, signing.Forged, check(), name)
	}
	_, p = signing.VerifySignature(nats.Header{}, signing.KindResult, "call-1", 1, payload)
	require.Equal(t, signing.Unsigned, p)
}

// Keys are read as nkey seeds or PEM PKCS #8 Ed25519 keys; a key file
// others may read, or group or others may write, is refused; a public
// key file is read as "U…" or PEM.
func TestKeyFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k, err := signing.KeyFile(filepath.Join(dir, "a.nk"))
	require.NoError(t, err)
	again, err := signing.LoadKey(filepath.Join(dir, "a.nk"))
	require.NoError(t, err)
	require.Equal(t, k.Public(), again.Public(), "KeyFile keeps the key it made")

	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	require.NoError(t, err)
	pemFile := filepath.Join(dir, "b.pem")
	require.NoError(t, os.WriteFile(pemFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o440))
	pk, err := signing.LoadKey(pemFile)
	require.NoError(t, err, "group read is allowed (Kubernetes Secret volumes with an fsGroup)")
	pubDER, err := x509.MarshalPKIXPublicKey(priv.Public())
	require.NoError(t, err)
	pub, err := signing.ParsePublic(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}))
	require.NoError(t, err)
	require.Equal(t, pk.Public(), pub)

	for _, mode := range []os.FileMode{0o604, 0o620, 0o602} {
		require.NoError(t, os.Chmod(pemFile, mode))
		_, err := signing.LoadKey(pemFile)
		require.Error(t, err, "mode %v", mode)
		require.NotContains(t, err.Error(), "PRIVATE KEY", "errors never quote a key")
	}
	_, err = signing.ParseKey([]byte("SUnot-a-seed"))
	require.Error(t, err)
	_, err = signing.ParsePublic([]byte(k.Public()[:20]))
	require.Error(t, err)
}

// A Trust allows a key for the pool its file names, the local worker
// key for every pool, and reads the directory again for a key it does
// not know.
func TestTrust(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := signing.KeyFile(filepath.Join(dir, "search.nk"))
	require.NoError(t, err)
	tr, err := signing.NewTrust(dir, filepath.Join(dir, "missing"))
	require.NoError(t, err)
	require.NoError(t, tr.Allows(a.Public(), "search"))
	require.ErrorContains(t, tr.Allows(a.Public(), "sandbox"), `not enrolled for pool "sandbox"`)

	local, err := signing.KeyFile(filepath.Join(dir, signing.LocalWorkerKey))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return tr.Allows(local.Public(), "anything") == nil }, 10*time.Second, 50*time.Millisecond,
		"a key put in the directory is read again")
}

// The keyring believes a dispatcher's key for every call and a pool's
// key for its own pool's tools only.
func TestKeyringBelievesEnrolledSignersOnly(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx, kv := t.Context(), env.Bus.Registry
	_, err := kv.Put(ctx, signing.SourcePrefix+"grep", []byte(`{"pool":"search"}`))
	require.NoError(t, err)
	pool, err := signing.NewKey()
	require.NoError(t, err)
	disp, err := signing.NewKey()
	require.NoError(t, err)
	stranger, err := signing.NewKey()
	require.NoError(t, err)
	_, err = kv.Put(ctx, signing.PoolKey(pool.Public(), "search"), []byte(`{}`))
	require.NoError(t, err)
	_, err = kv.Put(ctx, signing.DispatcherKey(disp.Public()), []byte(`{}`))
	require.NoError(t, err)
	kr := signing.NewKeyring(kv)
	check := func(k *signing.Key, tool string) (signing.Verdict, error) {
		data := []byte("result")
		return kr.Check(ctx, k.Sign(nil, signing.KindResult, "c1", 1, data), signing.KindResult, "c1", 1, data, tool)
	}
	v, err := check(pool, "grep")
	require.NoError(t, err)
	require.Equal(t, "search", v.Pool)
	v, err = check(disp, "anything")
	require.NoError(t, err)
	require.True(t, v.Dispatcher)
	for name, k := range map[string]*signing.Key{"another pool's tool": pool, "stranger": stranger} {
		tool := "grep"
		if k == pool {
			tool = "shell"
		}
		_, err := check(k, tool)
		require.Equal(t, signing.WrongPool, signing.AsError(err).Problem, name)
	}
}

func BenchmarkSign(b *testing.B) {
	k, _ := signing.NewKey()
	payload := make([]byte, 200)
	for b.Loop() {
		k.Sign(nil, signing.KindResult, "01M8JDSPCWZTYBHYDA93R972BW", 1, payload)
	}
}

func BenchmarkVerify(b *testing.B) {
	k, _ := signing.NewKey()
	payload := make([]byte, 200)
	h := k.Sign(nil, signing.KindResult, "01M8JDSPCWZTYBHYDA93R972BW", 1, payload)
	for b.Loop() {
		signing.VerifySignature(h, signing.KindResult, "01M8JDSPCWZTYBHYDA93R972BW", 1, payload)
	}
}

// A worker signs the result it stores; anyone verifies it with the
// public key alone.
func ExampleKey_Sign() {
	k, _ := signing.NewKey()
	payload := []byte("a ToolResponse, as stored")
	h := k.Sign(nil, signing.KindResult, "01M8JDSPCWZTYBHYDA93R972BW", 1, payload)
	signer, problem := signing.VerifySignature(h, signing.KindResult, "01M8JDSPCWZTYBHYDA93R972BW", 1, payload)
	fmt.Println(signer == k.Public(), problem == "")
	_, problem = signing.VerifySignature(h, signing.KindResult, "01M8JDSPCWZTYBHYDA93R972BW", 2, payload)
	fmt.Println(problem)
	// Output:
	// true true
	// forged
}

// A direct get may be answered by a replica that has not yet stored an
// enrolment the leader acknowledged. A Keyring that confirms (as every
// bus.Bus's does) reads a key it found missing again from the leader
// before it calls a genuine result forged; one that cannot reach the
// leader decides nothing. The lagging replica here is a second, empty
// bucket; the leader is the real bucket's stream leader.
func TestKeyringConfirmsAMissingEnrolmentWithTheLeader(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx, b := t.Context(), env.Bus
	_, err := b.Registry.Put(ctx, signing.SourcePrefix+"grep", []byte(`{"pool":"search"}`))
	require.NoError(t, err)
	k, err := signing.NewKey()
	require.NoError(t, err)
	_, err = b.Registry.Put(ctx, signing.PoolKey(k.Public(), "search"), []byte(`{}`))
	require.NoError(t, err)
	lagging, err := b.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "lagging"})
	require.NoError(t, err)
	data := []byte("result")
	h := k.Sign(nil, signing.KindResult, "c1", 1, data)
	check := func(kr *signing.Keyring) error {
		_, err := kr.Check(ctx, h, signing.KindResult, "c1", 1, data, "grep")
		return err
	}

	require.Equal(t, signing.WrongPool, signing.AsError(check(signing.NewKeyring(lagging))).Problem, "without confirming, the lagging replica decides")

	kr := signing.NewKeyring(lagging)
	kr.ConfirmWith(func(ctx context.Context, key string) ([]byte, error) {
		e, err := bus.KVGetFromLeader(ctx, b.NC, b.Config.RegistryBucket(), key)
		if err != nil {
			return nil, err
		}
		return e.Value, nil
	})
	require.NoError(t, check(kr), "the leader has the source and the enrolment")

	down := signing.NewKeyring(lagging)
	down.ConfirmWith(func(context.Context, string) ([]byte, error) { return nil, nats.ErrTimeout })
	err = check(down)
	require.ErrorIs(t, err, nats.ErrTimeout)
	require.Nil(t, signing.AsError(err), "an unanswered lookup is not a verdict")

	gone := signing.NewKeyring(lagging)
	gone.ConfirmWith(func(ctx context.Context, key string) ([]byte, error) {
		return nil, fmt.Errorf("leader: %w", jetstream.ErrKeyNotFound)
	})
	require.Equal(t, signing.WrongPool, signing.AsError(check(gone)).Problem, "missing on the leader too: not believed")
}

// A direct get that finds no replica to answer (the registry stream's
// leader killed and no other elected yet, or the process's server just
// lost) is made again within the caller's context by a bus Keyring: a
// dispatcher's GetResult during an election failed at once with "no
// responders" (faulttest's TestClusterGetResultRidesOutAnElection). The
// bucket here has no responder because its stream stops serving direct
// gets, then serves them again.
func TestKeyringRidesOutABucketWithoutResponders(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx, b := t.Context(), env.Bus
	k, err := signing.NewKey()
	require.NoError(t, err)
	kv, err := b.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "electing"})
	require.NoError(t, err)
	direct := func(on bool) {
		s, err := b.JS.Stream(ctx, "KV_electing")
		require.NoError(t, err)
		cfg := s.CachedInfo().Config
		cfg.AllowDirect = on
		_, err = b.JS.UpdateStream(ctx, cfg)
		require.NoError(t, err)
	}
	direct(false)
	_, err = kv.Put(ctx, signing.DispatcherKey(k.Public()), []byte(`{}`))
	require.NoError(t, err)
	data := []byte("result")
	h := k.Sign(nil, signing.KindResult, "c1", 1, data)
	check := func(ctx context.Context, kr *signing.Keyring) error {
		_, err := kr.Check(ctx, h, signing.KindResult, "c1", 1, data, "")
		return err
	}

	require.ErrorIs(t, check(ctx, signing.NewKeyring(kv)), nats.ErrNoResponders, "the lookup without a retry fails at once")

	kr := bus.NewKeyring(kv, b.NC, "electing")
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	err = check(short, kr)
	cancel()
	require.Error(t, err)
	require.Nil(t, signing.AsError(err), "an unanswered lookup is not a verdict")
	require.Error(t, short.Err(), "the lookup is made again until the caller's context ends: %v", err)

	done := make(chan error, 1)
	go func() { done <- check(ctx, kr) }()
	direct(true)
	select {
	case err := <-done:
		require.NoError(t, err, "the bucket answers again: the key is enrolled")
	case <-time.After(30 * time.Second):
		t.Fatal("the check never ended")
	}
}
