package skills

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A pipe put where walk stat'ed a regular file or a directory (swapped in
// between the stat and the open) is refused by what opens it, which does
// not block: read opens without blocking and checks the open file, as
// readDir does, so the worker's start never hangs in open(2).
func TestOpenedPipeIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	w := &skillWalk{l: &loader{byName: map[string]string{}}, root: root, files: map[string][]byte{}}
	for _, c := range []struct {
		name string
		open func() error
		want string
	}{
		{name: "read", open: func() error { return w.read("pipe") }, want: "pipe: not a regular file"},
		{name: "readDir", open: func() error { _, err := readDir(root, "pipe", MaxEntries); return err }, want: "not a directory"},
	} {
		done := make(chan error, 1)
		go func() { done <- c.open() }()
		select {
		case err := <-done:
			require.ErrorContains(t, err, c.want, c.name)
		case <-time.After(time.Minute):
			// Blocked in open(2): a writer releases it (and closing it
			// ends the read), then the test fails.
			wf, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			require.NoError(t, err)
			require.NoError(t, wf.Close())
			<-done
			t.Fatalf("%s blocked opening a pipe", c.name)
		}
	}
	require.Empty(t, w.files)
}
