package bus_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
)

const storedCanary = "stored-canary-4b7e2a91"

// storeHolds reports whether any file under dir holds s.
func storeHolds(t *testing.T, dir, s string) bool {
	t.Helper()
	found := false
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found = found || bytes.Contains(b, []byte(s))
		return nil
	}))
	return found
}

// runServer starts a server on dir with key, publishes a call holding
// storedCanary when publish is set, reads every call back, and shuts the
// server down. It returns the calls it read.
func runServer(t *testing.T, dir, key string, publish bool) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	srv, err := bus.StartEmbedded(ctx, bus.EmbeddedConfig{StoreDir: dir, EncryptionKey: key, SyncAlways: true})
	require.NoError(t, err)
	defer srv.Shutdown()
	nc, err := srv.Connect("encryption-test")
	require.NoError(t, err)
	defer nc.Close()
	b, err := bus.Open(ctx, nc, bus.Config{}, bus.Options{})
	require.NoError(t, err)
	if publish {
		_, err = b.JS.Publish(ctx, b.Subjects.Call(1, "t", "p", "tool"), []byte(`{"token":"`+storedCanary+`"}`))
		require.NoError(t, err)
	}
	var got []string
	for seq := uint64(1); ; seq++ {
		m, err := b.Calls.GetMsg(ctx, seq)
		if err != nil {
			break
		}
		got = append(got, string(m.Data))
	}
	return got
}

// TestEncryptedStore: with an EncryptionKey no store file holds a stored
// call's text, and the calls read back after a restart; a store written
// in clear is encrypted when the server starts with a key.
func TestEncryptedStore(t *testing.T) {
	t.Parallel()
	key := strings.Repeat("k", bus.MinEncryptionKeyBytes)

	enc := t.TempDir()
	require.Len(t, runServer(t, enc, key, true), 1)
	require.False(t, storeHolds(t, enc, storedCanary), "the encrypted store shows the call")
	got := runServer(t, enc, key, false)
	require.Len(t, got, 1)
	require.Contains(t, got[0], storedCanary, "read back with the key")

	plain := t.TempDir()
	runServer(t, plain, "", true)
	require.True(t, storeHolds(t, plain, storedCanary), "without a key the store is in clear (the scan works)")
	got = runServer(t, plain, key, false)
	require.Len(t, got, 1)
	require.False(t, storeHolds(t, plain, storedCanary), "a clear store is encrypted at the first start with a key")
}

func TestEncryptionConfigIsChecked(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  bus.EmbeddedConfig
		want string
	}{
		{bus.EmbeddedConfig{EncryptionKey: "tiny-key"}, "shorter than"},
		{bus.EmbeddedConfig{EncryptionKey: strings.Repeat("k", 32), EncryptionCipher: "rot13"}, "want chacha or aes"},
		{bus.EmbeddedConfig{EncryptionCipher: "aes"}, "without an EncryptionKey"},
	} {
		c.cfg.StoreDir = t.TempDir()
		_, err := bus.StartEmbedded(t.Context(), c.cfg)
		require.ErrorContains(t, err, c.want)
		if c.cfg.EncryptionKey != "" {
			require.NotContains(t, err.Error(), c.cfg.EncryptionKey, "the key is never shown")
		}
	}
}
