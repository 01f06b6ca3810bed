package dispatchd_test

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatchd"
	"github.com/toolwire/toolwire/pkg/client"
)

// TestEncryptionKeyEncryptsTheEmbeddedStore: with --nats-encryption-key
// the calls stream (arguments included) and the results are encrypted at
// rest: no file of the store holds a call's text.
func TestEncryptionKeyEncryptsTheEmbeddedStore(t *testing.T) {
	t.Parallel()
	const text = "at-rest-canary-0e6d51c3"
	keyFile := filepath.Join(t.TempDir(), "nats.key")
	require.NoError(t, os.WriteFile(keyFile, []byte("0123456789abcdef0123456789abcdef\n"), 0o600))
	dir := t.TempDir()

	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- dispatchd.Run(ctx, dispatchd.RunConfig{DataDir: dir, HTTPAddr: "127.0.0.1:0", Tools: builtin.Tools(),
			NATSEncryptionKey: "file:" + keyFile, Ready: ready, Logger: slog.New(slog.DiscardHandler)})
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	c, err := client.New("http://" + addr)
	require.NoError(t, err)
	res, err := c.Call(ctx, "echo", []byte(`{"text":"`+text+`"}`))
	require.NoError(t, err)
	require.NoError(t, res.Err())
	require.Equal(t, text, res.Text())
	cancel()
	require.NoError(t, <-done)

	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		require.False(t, bytes.Contains(b, []byte(text)), "%s holds a call's text", path)
		return err
	}))
}

// TestEncryptionKeyIsNeverAFlagValue: the flag takes a reference; a value
// that looks like the key itself is refused without being shown.
func TestEncryptionKeyIsNeverAFlagValue(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	code := dispatchd.Main([]string{"--nats-encryption-key", "my-plain-key-value-1234"}, &stderr, nil)
	require.Equal(t, 2, code)
	require.Contains(t, stderr.String(), "want file:/path or env:NAME")
	require.NotContains(t, stderr.String(), "my-plain-key-value-1234")
}
