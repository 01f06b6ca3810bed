package toolworker_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/logtest"
	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/toolworker"
)

// declEnv is an embedded server with the managed role credentials, and
// the layout opened in process with every permission.
type declEnv struct {
	srv     *bus.Embedded
	credDir string
	admin   *bus.Bus
}

func startDeclEnv(t *testing.T) declEnv {
	t.Helper()
	env := bustest.StartWithRoles(t)
	serveRegistry(t, env.Bus) // workers register through the dispatchers
	return declEnv{srv: env.Server, credDir: env.Creds.Dir, admin: env.Bus}
}

// startWorker runs a worker of the native pool on the worker credentials
// with maxDeliver, until the test ends; it returns its HTTP address and
// its log.
func (e declEnv) startWorker(t *testing.T, maxDeliver int) (string, *logtest.Buffer) {
	t.Helper()
	echo := tool.Must(tool.New("decl_echo", func(_ context.Context, in struct{ Text string }) (string, error) { return in.Text, nil }))
	logs := &logtest.Buffer{}
	wctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- toolworker.Run(wctx, toolworker.Options{SigningKey: testKeyFile, NATSURL: e.srv.ClientURL(), NATSCreds: bus.CredentialsFile(e.credDir, bus.RoleWorker),
			Tools: []*tool.Tool{echo}, HTTPAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), Ready: ready, Grace: time.Second,
			MaxDeliver: maxDeliver, Logger: logs.JSONLogger()})
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	select {
	case addr := <-ready:
		return addr, logs
	case err := <-done:
		t.Fatalf("the worker ended: %v\n%s", err, logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("the worker never served:\n%s", logs.String())
	}
	return "", nil
}

// maxDeliver is the live MaxDeliver of the native pool's consumer, 0 when
// it cannot be read.
func (e declEnv) maxDeliver(t *testing.T) int {
	cons, err := e.admin.Calls.Consumer(t.Context(), e.admin.Config.PoolConsumer("native"))
	if err != nil {
		return 0
	}
	return cons.CachedInfo().Config.MaxDeliver
}

// Two workers of one pool that declare different settings (a rolling
// upgrade that changes MaxDeliver) do not undo each other: the older one
// finds the newer one's declaration, stamped in the consumer, reports it
// once at warn and leaves it, and both stay ready. A hand edit over it
// (the settings changed, the stamp not) is still put back.
func TestWorkersWithDifferentPoolSettingsLeaveEachOthersDeclaration(t *testing.T) {
	t.Parallel()
	e := startDeclEnv(t)
	oldAddr, oldLogs := e.startWorker(t, 5)
	require.Equal(t, 5, e.maxDeliver(t))
	newAddr, newLogs := e.startWorker(t, 3)
	require.Equal(t, 3, e.maxDeliver(t), "the newest declaration holds")

	const foreign = `"level":"WARN","msg":"pool consumer holds another worker's declaration; left as it is"`
	until(t, 30*time.Second, "the older worker reports the newer declaration", func() bool {
		return strings.Contains(oldLogs.String(), foreign)
	})
	require.Contains(t, oldLogs.String(), `max_deliver: 3 → 5`, "with how it differs")
	require.Equal(t, 3, e.maxDeliver(t), "not reverted")
	for _, addr := range []string{oldAddr, newAddr} {
		code, body := readyz(t, addr)
		require.Equal(t, http.StatusOK, code, body)
	}

	// A hand edit over the newer declaration: put back by one of them
	// (whichever checks first), and then left by the other.
	cons, err := e.admin.Calls.Consumer(t.Context(), e.admin.Config.PoolConsumer("native"))
	require.NoError(t, err)
	edited := cons.CachedInfo().Config
	edited.MaxDeliver = 2
	_, err = e.admin.Calls.UpdateConsumer(t.Context(), edited)
	require.NoError(t, err)
	until(t, 30*time.Second, "the hand edit is put back", func() bool {
		n := e.maxDeliver(t)
		return n == 3 || n == 5
	})
	const putBack = `"msg":"pool consumer differs from its declared configuration: put back"`
	// Both may have found it edited before either put it back.
	n := strings.Count(oldLogs.String()+newLogs.String(), putBack)
	require.True(t, n == 1 || n == 2, "put back by one of them, or both: %d\n%s\n%s", n, oldLogs.String(), newLogs.String())
	require.Equal(t, 1, strings.Count(oldLogs.String(), foreign), "the newer declaration reported once\n%s", oldLogs.String())
}
