package bus_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// authEnv is an embedded server whose listener has the managed role
// credentials, with the layout opened in process.
type authEnv struct {
	srv   *bus.Embedded
	bus   *bus.Bus
	creds *bus.Credentials
	url   string
}

func startAuth(t *testing.T, cfg bus.Config, pools ...string) *authEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	creds, _, err := bus.EnsureCredentials(filepath.Join(t.TempDir(), "credentials"), pools...)
	require.NoError(t, err)
	users, err := creds.Users(cfg)
	require.NoError(t, err)
	srv, err := bus.StartEmbedded(ctx, bus.EmbeddedConfig{StoreDir: t.TempDir(), ListenAddr: "127.0.0.1:0", Users: users,
		SyncInterval: time.Minute})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect("admin")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	b, err := bus.Open(ctx, nc, cfg, bus.Options{})
	require.NoError(t, err)
	return &authEnv{srv: srv, bus: b, creds: creds, url: srv.ClientURL()}
}

// violations collects a connection's permission violations.
type violations struct {
	mu   sync.Mutex
	errs []string
	got  chan struct{}
}

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return
	}
	v.mu.Lock()
	v.errs = append(v.errs, err.Error())
	v.mu.Unlock()
	select {
	case v.got <- struct{}{}:
	default:
	}
}

// waitFor waits until a violation mentioning subject arrives.
func (v *violations) waitFor(t *testing.T, subject string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		v.mu.Lock()
		for _, e := range v.errs {
			if strings.Contains(e, `"`+subject+`"`) {
				v.mu.Unlock()
				return
			}
		}
		v.mu.Unlock()
		select {
		case <-v.got:
		case <-deadline:
			t.Fatalf("no permission violation for %s; got %q", subject, v.errs)
		}
	}
}

// dialRole connects with role's credentials and inbox prefix.
func (e *authEnv) dialRole(t *testing.T, role string) (*nats.Conn, *violations) {
	t.Helper()
	v := &violations{got: make(chan struct{}, 1)}
	nc, err := bus.Dial(bus.ConnConfig{URL: e.url, Name: role, CredsFile: bus.CredentialsFile(e.creds.Dir, role),
		InboxPrefix: bus.InboxPrefix(e.bus.Config, role)}, nats.ErrorHandler(v.handler))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc, v
}

func TestListenerNeverOpensWithoutCredentials(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"127.0.0.1:0", "0.0.0.0:0", "[::]:0"} {
		_, err := bus.StartEmbedded(t.Context(), bus.EmbeddedConfig{StoreDir: t.TempDir(), ListenAddr: addr})
		require.ErrorContains(t, err, "needs credentials", addr)
	}
	_, err := bus.StartEmbedded(t.Context(), bus.EmbeddedConfig{StoreDir: t.TempDir(), ListenAddr: "0.0.0.0:0",
		Users: []bus.User{{Name: "nobody"}}})
	require.ErrorContains(t, err, "neither NKey nor Password")
}

func TestListenerRefusesClientsWithoutValidCredentials(t *testing.T) {
	t.Parallel()
	e := startAuth(t, bus.Config{})

	_, err := nats.Connect(e.url, nats.MaxReconnects(0))
	require.ErrorIs(t, err, nats.ErrAuthorization, "no credentials")
	_, err = nats.Connect(e.url, nats.UserInfo("toolwire-in-process", "guess"), nats.MaxReconnects(0))
	require.ErrorIs(t, err, nats.ErrAuthorization, "the in-process user over TCP")
	_, err = nats.Connect(e.url, e.srv.InternalKeyOption(), nats.MaxReconnects(0))
	require.ErrorIs(t, err, nats.ErrAuthorization, "the in-process user's own key over TCP")

	// A seed of the right kind that the server does not know.
	stranger, _, err := bus.EnsureCredentials(filepath.Join(t.TempDir(), "other"))
	require.NoError(t, err)
	_, err = bus.Dial(bus.ConnConfig{URL: e.url, CredsFile: bus.CredentialsFile(stranger.Dir, bus.RoleWorker)}, nats.MaxReconnects(0))
	require.ErrorIs(t, err, nats.ErrAuthorization, "an unknown nkey")

	// In-process connections need nothing.
	nc, err := e.srv.Connect("in-process")
	require.NoError(t, err)
	nc.Close()
	for _, role := range bus.Roles() {
		nc, _ := e.dialRole(t, role)
		require.NoError(t, nc.Flush(), role)
	}
}

func TestOperatorCannotPublishCalls(t *testing.T) {
	t.Parallel()
	e := startAuth(t, bus.Config{})
	nc, v := e.dialRole(t, bus.RoleOperator)
	subject := e.bus.Subjects.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, "acme", "builtin", "echo")
	require.NoError(t, nc.Publish(subject, []byte("forged")))
	v.waitFor(t, subject)
	// Nor through a retry schedule the dispatchers' mover would requeue.
	retry := e.bus.Subjects.RetrySchedule("01FORGED", 1)
	require.NoError(t, nc.Publish(retry, []byte("forged")))
	v.waitFor(t, retry)
	info, err := e.bus.Calls.Info(t.Context())
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "nothing reached CALLS")
}

func TestWorkerBoundaries(t *testing.T) {
	t.Parallel()
	e := startAuth(t, bus.Config{})
	nc, v := e.dialRole(t, bus.RoleWorker)
	ctx := t.Context()

	// A worker attaches to the layout, and fetches from a pool's
	// consumer, which a dispatcher made ...
	wb, err := bus.Open(ctx, nc, bus.Config{}, bus.Options{Bind: true})
	require.NoError(t, err)
	_, err = e.bus.EnsurePool(ctx, bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE})
	require.NoError(t, err)
	pool, err := wb.Calls.Consumer(ctx, e.bus.Config.PoolConsumer("native"))
	require.NoError(t, err)
	_, err = pool.FetchNoWait(1)
	require.NoError(t, err)
	// ... but creates or updates none: a create's filters and deliver
	// subject are in its body, which permissions cannot see.
	refusedCreate(t, wb, v, "evil", e.bus.Subjects.AllCalls())
	refusedCreate(t, wb, v, e.bus.Config.PoolConsumer("native"), e.bus.Subjects.AllCalls())
	// It reads a redelivered call's result and events from the leaders.
	_, err = bus.LastMsgFromLeader(ctx, wb.JS, wb.Results, e.bus.Subjects.Result("acme", "d1", "01CALL"))
	require.ErrorIs(t, err, jetstream.ErrMsgNotFound)
	_, err = bus.LastMsgFromLeader(ctx, wb.JS, wb.Events, e.bus.Subjects.Event("acme", "d1", "01CALL"))
	require.ErrorIs(t, err, jetstream.ErrMsgNotFound)

	// It asks the dispatchers to run a call's after-hooks, and gets
	// their reply.
	hooks, err := e.bus.NC.Subscribe(bus.AfterHookSubject(e.bus.Config), func(m *nats.Msg) { _ = m.Respond([]byte("ran")) })
	require.NoError(t, err)
	t.Cleanup(func() { _ = hooks.Unsubscribe() })
	require.NoError(t, e.bus.NC.Flush())
	reply, err := nc.Request(bus.AfterHookSubject(e.bus.Config), []byte("call"), 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, "ran", string(reply.Data))

	// It may not forge calls (skipping admission) ...
	call := e.bus.Subjects.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, "acme", "builtin", "echo")
	require.NoError(t, nc.Publish(call, []byte("forged")))
	v.waitFor(t, call)
	// ... read stored calls directly, or listen to them ...
	get := "$JS.API.DIRECT.GET." + e.bus.Config.CallsStream()
	require.NoError(t, nc.PublishRequest(get, nc.NewRespInbox(), []byte(`{"seq":1}`)))
	v.waitFor(t, get)
	_, err = nc.SubscribeSync(e.bus.Subjects.AllCalls())
	require.NoError(t, err)
	v.waitFor(t, e.bus.Subjects.AllCalls())
	// ... see what other roles' inboxes receive (the dispatcher's fetches
	// and gets) ...
	_, err = nc.SubscribeSync("_INBOX.>")
	require.NoError(t, err)
	v.waitFor(t, "_INBOX.>")
	// ... or change the layout.
	_, err = nc.Request("$JS.API.STREAM.DELETE."+e.bus.Config.CallsStream(), nil, time.Second)
	require.Error(t, err)
	v.waitFor(t, "$JS.API.STREAM.DELETE."+e.bus.Config.CallsStream())
	_, err = nc.Request("$JS.API.STREAM.UPDATE."+e.bus.Config.CallsStream(), nil, time.Second)
	require.Error(t, err)
	v.waitFor(t, "$JS.API.STREAM.UPDATE."+e.bus.Config.CallsStream())
	info, err := e.bus.Calls.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs)
}

// refusedCreate asserts that wb's credential cannot create or update the
// consumer name on CALLS with filter, with a push deliver subject or
// without.
func refusedCreate(t *testing.T, wb *bus.Bus, v *violations, name, filter string) {
	t.Helper()
	for _, deliver := range []string{"", "toolwire.admin.dlq.retry"} {
		ctx, cancel := context2s(t)
		_, err := wb.Calls.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: name, FilterSubject: filter,
			AckPolicy: jetstream.AckExplicitPolicy, DeliverSubject: deliver})
		cancel()
		require.Error(t, err, "%s over %s (deliver %q)", name, filter, deliver)
		v.waitFor(t, "$JS.API.CONSUMER.CREATE."+wb.Config.CallsStream()+"."+name+"."+filter)
	}
	ctx, cancel := context2s(t)
	defer cancel()
	_, err := wb.Calls.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: name, FilterSubjects: []string{filter, filter + "x"},
		AckPolicy: jetstream.AckExplicitPolicy})
	require.Error(t, err, "%s with several filters", name)
	v.waitFor(t, "$JS.API.CONSUMER.CREATE."+wb.Config.CallsStream()+"."+name)
}

// A pool's credential (bus.PoolRole) reaches its own pool only: it
// fetches from and settles its own consumer, but creates no consumer on
// CALLS (not even its own name over another pool's calls), cannot look up
// or fetch from another pool's consumer, announce for another pool, or
// hear another pool's or the worker role's inboxes (where fetched calls
// arrive). With the worker credential of the current main, a worker of
// pool a could make a consumer over pool b's calls and read them.
func TestPoolCredentialReachesOnlyItsPool(t *testing.T) {
	t.Parallel()
	e := startAuth(t, bus.Config{}, "a", "b")
	ctx := t.Context()
	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	s := e.bus.Subjects
	for pool, tool := range map[string]string{"a": "ta", "b": "tb"} {
		_, err := e.bus.EnsurePool(ctx, bus.PoolConfig{Name: pool, Type: native, Subjects: []string{s.ToolSubject(native, "p", tool)}})
		require.NoError(t, err)
	}
	_, err := e.bus.JS.Publish(ctx, s.Call(native, "acme", "p", "tb"), []byte("pool b's call, secrets included"))
	require.NoError(t, err)

	nc, v := e.dialRole(t, bus.PoolRole("a"))
	wb, err := bus.Open(ctx, nc, bus.Config{}, bus.Options{Bind: true})
	require.NoError(t, err)
	// Its own consumer: looked up and fetched from.
	own, err := wb.Calls.Consumer(ctx, e.bus.Config.PoolConsumer("a"))
	require.NoError(t, err)
	_, err = own.FetchNoWait(1)
	require.NoError(t, err)

	// No consumer of its making: a new one, its own name over b's calls,
	// another type's name of its own (a-sandbox) over everything.
	refusedCreate(t, wb, v, "evil", s.AllCalls())
	refusedCreate(t, wb, v, e.bus.Config.PoolConsumer("a"), s.ToolSubject(native, "p", "tb"))
	refusedCreate(t, wb, v, e.bus.Config.PoolConsumer("a-sandbox"), s.AllCalls())
	list := "$JS.API.CONSUMER.LIST." + e.bus.Config.CallsStream()
	require.NoError(t, nc.PublishRequest(list, nc.NewRespInbox(), nil))
	v.waitFor(t, list)

	// Pool b's consumer: neither looked up nor fetched from.
	bCons := e.bus.Config.CallsStream() + "." + e.bus.Config.PoolConsumer("b")
	for _, subject := range []string{"$JS.API.CONSUMER.INFO." + bCons, "$JS.API.CONSUMER.MSG.NEXT." + bCons} {
		require.NoError(t, nc.PublishRequest(subject, nc.NewRespInbox(), []byte(`{"batch":1,"no_wait":true}`)))
		v.waitFor(t, subject)
	}
	// Not an announcement or consumer request for pool b.
	for _, pool := range []string{"b", "b-native", "*"} {
		subject := bus.PoolRegistrySubject(e.bus.Config, pool)
		require.NoError(t, nc.Publish(subject, []byte(`{"op":"ensure","pool":"b"}`)))
		v.waitFor(t, subject)
	}
	require.Contains(t, mustPerms(t, bus.PoolRole("a")).Publish, bus.PoolRegistrySubject(e.bus.Config, "a"))
	require.Contains(t, mustPerms(t, bus.PoolRole("a")).Publish, bus.PoolRegistrySubject(e.bus.Config, "a-mcp"))
	// Not the inboxes where b's workers, or any-pool workers, get calls.
	for _, inbox := range []string{bus.InboxPrefix(e.bus.Config, bus.PoolRole("b")) + ".>", bus.InboxPrefix(e.bus.Config, bus.RoleWorker) + ".>"} {
		_, err := nc.SubscribeSync(inbox)
		require.NoError(t, err)
		v.waitFor(t, inbox)
	}

	info, err := e.bus.Calls.Consumer(ctx, e.bus.Config.PoolConsumer("b"))
	require.NoError(t, err)
	require.EqualValues(t, 1, info.CachedInfo().NumPending, "b's call is still b's, undelivered")
	names := e.bus.Calls.ConsumerNames(ctx)
	var got []string
	for n := range names.Name() {
		got = append(got, n)
	}
	require.NoError(t, names.Err())
	require.ElementsMatch(t, []string{e.bus.Config.PoolConsumer("a"), e.bus.Config.PoolConsumer("b")}, got, "no consumer was made")
}

func TestPoolRoleNames(t *testing.T) {
	t.Parallel()
	pool, ok := bus.PoolOfRole(bus.PoolRole("a"))
	require.True(t, ok)
	require.Equal(t, "a", pool)
	_, ok = bus.PoolOfRole(bus.RoleWorker)
	require.False(t, ok)
	// A pool named <x>-<type> is the part of pool x that pool-x's
	// credential reaches: it has no credential of its own (with one, a
	// third-party pool "a" would read its calls), and runs <type> tools
	// only.
	for _, pools := range [][]string{{"a", "a-native"}, {"a-native"}, {"b", "a-http"}} {
		require.ErrorContains(t, bus.ValidatePoolRoles(pools), "is the "+pools[len(pools)-1][2:]+" part of pool \"a\"", pools)
	}
	require.ErrorContains(t, bus.ValidatePoolRoles([]string{"x", "x"}), "both roles would reach pool \"x\"")
	require.NoError(t, bus.ValidatePoolRoles([]string{"a", "native", "shadow-pool", "a-nativ"}))
	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	require.ErrorContains(t, bus.PoolConfig{Name: "a-sandbox", Type: native}.WithDefaults().Validate(), "rename the pool")
	require.NoError(t, bus.PoolConfig{Name: "a-native", Type: native}.WithDefaults().Validate())
	require.NoError(t, bus.PoolConfig{Name: "shadow-native", Type: native}.WithDefaults().Validate())
	require.ErrorContains(t, bus.ValidatePoolRoles([]string{"a.b"}), "a pool's name")
	// Pool "shadow"'s role would reach the default shadow pools
	// (shadow-<type>), which replay any pool's tools.
	require.ErrorContains(t, bus.ValidatePoolRoles([]string{"a", "shadow"}), "default shadow pools")
	// Without a credential, <x>-<type> of type <type> is a pool name.
	require.NoError(t, bus.CheckPoolName("web-http", toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP))
	require.NoError(t, bus.ValidPoolName("web-http"))
	require.Error(t, bus.ValidPoolName("a.b"))
	_, _, err := bus.EnsureCredentials(filepath.Join(t.TempDir(), "c"), "x", "x")
	require.ErrorContains(t, err, "both roles")
	_, err = bus.RolePermissions(bus.Config{}, bus.PoolRole("a>"))
	require.Error(t, err)
}

func TestOperatorCannotSeeWorkerInboxes(t *testing.T) {
	t.Parallel()
	e := startAuth(t, bus.Config{})
	nc, v := e.dialRole(t, bus.RoleOperator)
	inbox := bus.InboxPrefix(e.bus.Config, bus.RoleWorker) + ".>"
	_, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	v.waitFor(t, inbox)
}

func TestPermissionsFollowThePrefix(t *testing.T) {
	t.Parallel()
	p, err := bus.RolePermissions(bus.Config{Prefix: "acme-tw"}, bus.RoleWorker)
	require.NoError(t, err)
	for _, s := range append(p.Publish, p.Subscribe...) {
		require.True(t, strings.Contains(s, "acme-tw") || strings.Contains(s, "ACME_TW"), "%s names no part of the installation", s)
	}
	_, err = bus.RolePermissions(bus.Config{}, "root")
	require.ErrorContains(t, err, "unknown role")
}

func TestEnsureCredentials(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "credentials")
	first, created, err := bus.EnsureCredentials(dir)
	require.NoError(t, err)
	require.Equal(t, bus.Roles(), created)
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	for _, role := range bus.Roles() {
		fi, err := os.Stat(bus.CredentialsFile(dir, role))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), role)
		require.True(t, strings.HasPrefix(first.PublicKey(role), "U"), role)
	}
	leftovers, err := filepath.Glob(filepath.Join(dir, ".seed-*"))
	require.NoError(t, err)
	require.Empty(t, leftovers)

	// Reused, not remade.
	again, created, err := bus.EnsureCredentials(dir)
	require.NoError(t, err)
	require.Empty(t, created)
	for _, role := range bus.Roles() {
		require.Equal(t, first.PublicKey(role), again.PublicKey(role))
	}

	// A missing one is made; the others stay.
	require.NoError(t, os.Remove(bus.CredentialsFile(dir, bus.RoleOperator)))
	again, created, err = bus.EnsureCredentials(dir)
	require.NoError(t, err)
	require.Equal(t, []string{bus.RoleOperator}, created)
	require.Equal(t, first.PublicKey(bus.RoleWorker), again.PublicKey(bus.RoleWorker))
	require.NotEqual(t, first.PublicKey(bus.RoleOperator), again.PublicKey(bus.RoleOperator))

	// Files others may read, and files that hold no seed, are refused,
	// never rewritten.
	worker := bus.CredentialsFile(dir, bus.RoleWorker)
	require.NoError(t, os.Chmod(worker, 0o644))
	_, _, err = bus.EnsureCredentials(dir)
	require.ErrorContains(t, err, "chmod 600")
	require.NoError(t, os.Chmod(worker, 0o600))
	require.NoError(t, os.WriteFile(worker, []byte("SUPERSECRETNOTASEED\n"), 0o600))
	_, _, err = bus.EnsureCredentials(dir)
	require.ErrorContains(t, err, "not an nkey seed")
	require.NotContains(t, err.Error(), "SUPERSECRET")
	require.NoError(t, os.Chmod(dir, 0o755))
	_, _, err = bus.EnsureCredentials(dir)
	require.ErrorContains(t, err, "chmod 700")
}

// The credential of a pool dropped from --pools-credentials is removed:
// the server no longer accepts it, and a local worker of that pool would
// pick it before the worker credential and be refused. Nothing else of
// the directory is touched.
func TestStalePoolCredentialsAreRemoved(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "credentials")
	_, _, err := bus.EnsureCredentials(dir, "a", "b")
	require.NoError(t, err)
	notASeed := filepath.Join(dir, "pool-c.nk")
	require.NoError(t, os.WriteFile(notASeed, []byte("not a seed\n"), 0o600))
	link := filepath.Join(dir, "pool-d.nk")
	require.NoError(t, os.Symlink(bus.CredentialsFile(dir, bus.PoolRole("a")), link))

	removed, err := bus.RemoveStalePoolCredentials(dir, []string{"a"})
	require.NoError(t, err)
	require.Equal(t, []string{bus.PoolRole("b")}, removed)
	for _, role := range []string{bus.RoleWorker, bus.RoleOperator, bus.PoolRole("a")} {
		require.FileExists(t, bus.CredentialsFile(dir, role))
	}
	require.NoFileExists(t, bus.CredentialsFile(dir, bus.PoolRole("b")))
	require.FileExists(t, notASeed)
	_, err = os.Lstat(link)
	require.NoError(t, err)
	require.Empty(t, bus.LocalCredentials(filepath.Dir(dir), bus.PoolRole("b"), "nats://127.0.0.1:4222"))
}

func TestCredentialsFileKinds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	creds, _, err := bus.EnsureCredentials(filepath.Join(t.TempDir(), "credentials"))
	require.NoError(t, err)
	srv, err := bus.StartEmbedded(ctx, bus.EmbeddedConfig{StoreDir: t.TempDir(), ListenAddr: "127.0.0.1:0", Users: []bus.User{
		{Name: "seed", NKey: creds.PublicKey(bus.RoleWorker)},
		{Name: "alice", Password: "pass:word"},
	}})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	for name, file := range map[string]string{
		"nkey seed":     bus.CredentialsFile(creds.Dir, bus.RoleWorker),
		"user:password": write("alice", "alice:pass:word\n"),
	} {
		nc, err := bus.Dial(bus.ConnConfig{URL: srv.ClientURL(), CredsFile: file}, nats.MaxReconnects(0))
		require.NoError(t, err, name)
		nc.Close()
	}
	_, err = bus.Dial(bus.ConnConfig{URL: srv.ClientURL(), CredsFile: write("wrong", "alice:nope")}, nats.MaxReconnects(0))
	require.ErrorIs(t, err, nats.ErrAuthorization)
	_, err = bus.Dial(bus.ConnConfig{URL: srv.ClientURL(), CredsFile: write("junk", "hunter2\n")})
	require.ErrorContains(t, err, "neither a NATS credentials file")
	require.NotContains(t, err.Error(), "hunter2")
	_, err = bus.Dial(bus.ConnConfig{URL: srv.ClientURL(), CredsFile: filepath.Join(dir, "absent")})
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestLocalCredentials(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	_, _, err := bus.EnsureCredentials(bus.CredentialsDir(data))
	require.NoError(t, err)
	want := bus.CredentialsFile(bus.CredentialsDir(data), bus.RoleOperator)
	for _, url := range []string{"nats://127.0.0.1:4222", "localhost:4222", "nats://[::1]:4222,nats://127.0.0.2:4223"} {
		require.Equal(t, want, bus.LocalCredentials(data, bus.RoleOperator, url), url)
	}
	for _, url := range []string{"nats://10.0.0.1:4222", "nats://127.0.0.1:4222,nats://nats.example:4222", "nats://u:p@127.0.0.1:4222", ""} {
		require.Empty(t, bus.LocalCredentials(data, bus.RoleOperator, url), url)
	}
	require.Empty(t, bus.LocalCredentials(t.TempDir(), bus.RoleOperator, "nats://127.0.0.1:4222"), "no such file")
}

func TestBindAttachesWithoutRewriting(t *testing.T) {
	t.Parallel()
	e := startAuth(t, bus.Config{CallsMaxAge: 48 * time.Hour})
	nc, _ := e.dialRole(t, bus.RoleWorker)
	// A worker's defaults (CallsMaxAge 720h) do not rewrite the
	// dispatcher's settings.
	wb, err := bus.Open(t.Context(), nc, bus.Config{}, bus.Options{Bind: true})
	require.NoError(t, err)
	info, err := wb.Calls.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, 48*time.Hour, info.Config.MaxAge)

	// A binding client with every permission creates what is missing.
	fresh, err := bus.StartEmbedded(t.Context(), bus.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(fresh.Shutdown)
	fnc, err := fresh.Connect("binder")
	require.NoError(t, err)
	t.Cleanup(fnc.Close)
	fb, err := bus.Open(t.Context(), fnc, bus.Config{}, bus.Options{Bind: true})
	require.NoError(t, err)
	info, err = fb.Calls.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, jetstream.LimitsPolicy, info.Config.Retention)
}

// A worker hears approvals through a core subscription on their keys and
// reads them by direct get; it may create no consumer on a stream it
// writes (EVENTS, the registry): a push consumer would let the server
// deliver its writes onto any subject.
func TestWorkerWatchesTheRegistry(t *testing.T) {
	t.Parallel()
	e := startAuth(t, bus.Config{})
	nc, v := e.dialRole(t, bus.RoleWorker)
	ctx := t.Context()
	wb, err := bus.Open(ctx, nc, bus.Config{}, bus.Options{Bind: true})
	require.NoError(t, err)
	heard := make(chan *nats.Msg, 1)
	sub, err := nc.ChanSubscribe("$KV."+wb.Config.RegistryBucket()+".approvals.>", heard)
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	// A dispatcher records the approval (workers never write the registry).
	_, err = e.bus.Registry.Create(ctx, "approvals.search", []byte("hash"))
	require.NoError(t, err)
	select {
	case m := <-heard:
		require.True(t, strings.HasSuffix(m.Subject, ".approvals.search"), m.Subject)
	case <-time.After(10 * time.Second):
		t.Fatal("no update")
	}
	require.NoError(t, sub.Unsubscribe())
	got, err := wb.Registry.Get(ctx, "approvals.search")
	require.NoError(t, err)
	require.Equal(t, "hash", string(got.Value()))
	require.NoError(t, nc.Flush())
	v.mu.Lock()
	require.Empty(t, v.errs)
	v.mu.Unlock()

	// No consumer on the registry or EVENTS, push or pull.
	for _, stream := range []jetstream.Stream{wb.Events} {
		_, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{FilterSubject: wb.Subjects.AllEvents()})
		require.Error(t, err, "a consumer on EVENTS")
	}
	_, err = wb.Registry.Watch(ctx, "approvals.>", jetstream.UpdatesOnly())
	require.Error(t, err, "a KV watch is a consumer on the registry")
}

// An operator sees the layout's metadata (what `nats stream ls|info` and
// `nats consumer ls|info` show with its nkey), never a call.
func TestOperatorInspectsTheLayout(t *testing.T) {
	t.Parallel()
	e := startAuth(t, bus.Config{})
	ctx := t.Context()
	_, err := e.bus.EnsurePool(ctx, bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE})
	require.NoError(t, err)
	nc, v := e.dialRole(t, bus.RoleOperator)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.AccountInfo(ctx)
	require.NoError(t, err)
	names := js.StreamNames(ctx)
	var streams []string
	for n := range names.Name() {
		streams = append(streams, n)
	}
	require.NoError(t, names.Err())
	require.Contains(t, streams, e.bus.Config.CallsStream())
	calls, err := js.Stream(ctx, e.bus.Config.CallsStream())
	require.NoError(t, err)
	lister := calls.ListConsumers(ctx)
	var consumers []string
	for ci := range lister.Info() {
		consumers = append(consumers, ci.Name)
	}
	require.NoError(t, lister.Err())
	require.Contains(t, consumers, e.bus.Config.PoolConsumer("native"))
	_, err = calls.Consumer(ctx, e.bus.Config.PoolConsumer("native"))
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	v.mu.Lock()
	defer v.mu.Unlock()
	require.Empty(t, v.errs)
}

// An operator credential reads, retries and approves, and changes nothing
// else: a pool's consumer cannot be updated, deleted or fetched from, and
// no stream can be changed; its own scans still read.
func TestOperatorCannotChangeConsumersOrStreams(t *testing.T) {
	t.Parallel()
	e := startAuth(t, bus.Config{})
	ctx := t.Context()
	pool, err := e.bus.EnsurePool(ctx, bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE})
	require.NoError(t, err)
	declared := pool.CachedInfo().Config
	name := declared.Durable
	nc, v := e.dialRole(t, bus.RoleOperator)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	calls := e.bus.Config.CallsStream()
	refused := func(subject string, call func(ctx context.Context) error) {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		require.Error(t, call(rctx), subject)
		v.waitFor(t, subject)
	}

	// The pool's consumer: MaxDeliver 5 → 2, in either create form.
	edited := declared
	edited.MaxDeliver = 2
	refused("$JS.API.CONSUMER.CREATE."+calls+"."+name+"."+declared.FilterSubject, func(ctx context.Context) error {
		_, err := js.CreateOrUpdateConsumer(ctx, calls, edited)
		return err
	})
	multi := edited
	multi.FilterSubject, multi.FilterSubjects = "", []string{declared.FilterSubject}
	refused("$JS.API.CONSUMER.CREATE."+calls+"."+name, func(ctx context.Context) error {
		_, err := js.UpdateConsumer(ctx, calls, multi)
		return err
	})
	refused("$JS.API.CONSUMER.DELETE."+calls+"."+name, func(ctx context.Context) error {
		return js.DeleteConsumer(ctx, calls, name)
	})
	// A fetch would spend a delivery of each call it takes.
	next := "$JS.API.CONSUMER.MSG.NEXT." + calls + "." + name
	require.NoError(t, nc.PublishRequest(next, nc.NewRespInbox(), []byte(`{"batch":1,"no_wait":true}`)))
	v.waitFor(t, next)
	// Streams: update, purge, delete.
	for _, verb := range []string{"UPDATE", "PURGE", "DELETE"} {
		subject := "$JS.API.STREAM." + verb + "." + calls
		refused(subject, func(ctx context.Context) error {
			_, err := nc.RequestWithContext(ctx, subject, []byte(`{}`))
			return err
		})
	}
	info, err := e.bus.Calls.Consumer(ctx, name)
	require.NoError(t, err, "the pool's consumer is still there")
	require.Equal(t, 5, info.CachedInfo().Config.MaxDeliver, "and unchanged")

	// What the operator does need still works: two scans of CALLS at
	// once, each on a slot of its own, gone when closed.
	for i := range 3 {
		_, err := e.bus.JS.Publish(ctx, e.bus.Subjects.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, "acme", "builtin", "echo"),
			[]byte{byte(i)})
		require.NoError(t, err)
	}
	ocalls, err := js.Stream(ctx, calls)
	require.NoError(t, err)
	var scans []*bus.Scan
	for range 2 {
		scan, err := bus.NewScan(ctx, ocalls, jetstream.OrderedConsumerConfig{FilterSubjects: []string{e.bus.Subjects.AllCalls(), e.bus.Subjects.AllShadow()}})
		require.NoError(t, err)
		scans = append(scans, scan)
	}
	for _, scan := range scans {
		var got []byte
		for len(got) < 3 {
			batch, err := scan.Fetch(2, jetstream.FetchMaxWait(time.Second))
			require.NoError(t, err)
			for m := range batch.Messages() {
				got = append(got, m.Data()...)
			}
		}
		require.Equal(t, []byte{0, 1, 2}, got, "in order, none twice")
	}
	for _, scan := range scans {
		require.NoError(t, scan.Close())
	}
	lister := e.bus.Calls.ListConsumers(ctx)
	var left []string
	for ci := range lister.Info() {
		left = append(left, ci.Name)
	}
	require.NoError(t, lister.Err())
	require.Equal(t, []string{name}, left, "no scan consumer left")
}

// Workers never use the dashboard's sign-out bucket: they do not attach to
// it (a worker started before the dispatchers that create the bucket
// starts all the same) and may not look it up.
func TestWorkerDoesNotAttachToTheSignOutBucket(t *testing.T) {
	t.Parallel()
	e := startAuth(t, bus.Config{})
	ctx := t.Context()
	// The layout of dispatchers from before the bucket.
	require.NoError(t, e.bus.JS.DeleteKeyValue(ctx, e.bus.Config.RevocationsBucket()))
	nc, _ := e.dialRole(t, bus.RoleWorker)
	wb, err := bus.Open(ctx, nc, bus.Config{}, bus.Options{Bind: true})
	require.NoError(t, err, "a worker attaches without the sign-out bucket")
	require.Nil(t, wb.Revocations)

	perms, err := bus.RolePermissions(bus.Config{}, bus.RoleWorker)
	require.NoError(t, err)
	for _, p := range append(perms.Publish, perms.Subscribe...) {
		require.NotContains(t, p, e.bus.Config.RevocationsBucket())
	}
}

// TestKeyringConfirmsForEveryReader: every role that checks signatures
// with a confirming keyring (the dispatcher's bus, a worker's, the
// operator's audit) may read the registry from its leader. The operator
// could not: its audit's confirmation of a key found missing was refused
// by permissions, which a request only sees as no answer, and was made
// again until its context ended (with `toolctl audit`, which checks
// every result's signature, and no deadline, for ever; CI hung 40 minutes
// on it).
func TestKeyringConfirmsForEveryReader(t *testing.T) {
	t.Parallel()
	e := startAuth(t, bus.Config{}, "p")
	stranger, err := signing.NewKey()
	require.NoError(t, err)
	statement := []byte("a result")
	for _, role := range []string{bus.RoleWorker, bus.PoolRole("p"), bus.RoleOperator} {
		nc, refused := e.dialRole(t, role)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		kv, err := jetstream.New(nc)
		require.NoError(t, err)
		registry, err := kv.KeyValue(ctx, e.bus.Config.RegistryBucket())
		require.NoError(t, err, role)
		keys := bus.NewKeyring(registry, nc, e.bus.Config.RegistryBucket())
		h := stranger.Sign(nil, signing.KindResult, "call-1", 1, statement)
		_, err = keys.Check(ctx, h, signing.KindResult, "call-1", 1, statement, "")
		cancel()
		verdict := signing.AsError(err)
		require.NotNil(t, verdict, "%s: a verdict, not a failed lookup: %v", role, err)
		require.Equal(t, signing.WrongPool, verdict.Problem, role)
		refused.mu.Lock()
		require.Empty(t, refused.errs, role)
		refused.mu.Unlock()
	}
}

// TestALeaderReadRefusedByPermissionsFailsAtOnce: a read from a stream's
// leader that the connection may not make is an error naming the
// permissions, not a missing leader asked again until the context ends.
func TestALeaderReadRefusedByPermissionsFailsAtOnce(t *testing.T) {
	t.Parallel()
	e := startAuth(t, bus.Config{})
	nc, _ := e.dialRole(t, bus.RoleOperator) // no leader reads of the approvals bucket
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := bus.KVGetFromLeader(ctx, nc, e.bus.Config.ApprovalsBucket(), "k")
	require.ErrorIs(t, err, nats.ErrPermissionViolation)
	require.NoError(t, ctx.Err(), "failed before its context ended")
}
