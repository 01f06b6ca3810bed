package registry_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A pool's consumer is made by the dispatchers at its worker's request
// (registry.OpEnsure), over the pool's own tools only: a tool another
// pool holds, a tool the pool never claimed, a wildcard over every call,
// and no subjects at all are refused; a request whose body names another
// pool than its subject is refused, and a pool's credential cannot send
// one on another pool's subject. A deleted consumer is made again on the
// next request.
func TestPoolConsumersAreMadeByTheDispatchers(t *testing.T) {
	t.Parallel()
	e := startAnnounce(t, "a", "b")
	ctx := t.Context()
	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	s := e.bus.Subjects
	a := e.workerAs(t, bus.PoolRole("a"), "a", native)
	b := e.workerAs(t, bus.PoolRole("b"), "b", native)
	require.NoError(t, a.Publish(ctx, []*toolwirev1.ToolSpec{spec("ta", "Pool a's tool.")}, false))
	require.NoError(t, b.Publish(ctx, []*toolwirev1.ToolSpec{spec("tb", "Pool b's tool.")}, false))
	ta, tb := s.ToolSubject(native, "builtin", "ta"), s.ToolSubject(native, "builtin", "tb")

	name, err := a.Ensure(ctx, bus.PoolConfig{Name: "a", Type: native, Subjects: []string{ta}, MaxDeliver: 3})
	require.NoError(t, err)
	require.Equal(t, e.bus.Config.PoolConsumer("a"), name)
	cons, err := e.bus.Calls.Consumer(ctx, name)
	require.NoError(t, err)
	require.Equal(t, []string{ta}, bus.ConsumerFilters(cons.CachedInfo().Config))
	require.Equal(t, 3, cons.CachedInfo().Config.MaxDeliver)

	for what, subjects := range map[string][]string{
		"defined by":          {ta, tb},
		"has no source":       {s.ToolSubject(native, "builtin", "unclaimed")},
		"not a call subject":  {s.AllCalls()},
		"not a call subject ": {s.CallsOfType(native)},
		"no subjects":         nil,
	} {
		_, err := a.Ensure(ctx, bus.PoolConfig{Name: "a", Type: native, Subjects: subjects})
		require.ErrorIs(t, err, registry.ErrRefused, what)
		require.ErrorContains(t, err, strings.TrimSpace(what))
	}
	cons, err = e.bus.Calls.Consumer(ctx, name)
	require.NoError(t, err)
	require.Equal(t, []string{ta}, bus.ConsumerFilters(cons.CachedInfo().Config), "unchanged")

	// Pool b's subject, from pool a's credential: not permitted, so no
	// dispatcher ever hears it.
	wrong := a
	wrong.Pool = "b"
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = wrong.Ensure(short, bus.PoolConfig{Name: "b", Type: native, Subjects: []string{tb}})
	cancel()
	require.Error(t, err)
	// Pool b named in the body on pool a's subject: refused.
	body, err := json.Marshal(registry.Announcement{Op: registry.OpEnsure, Pool: "b", Type: native,
		Consumer: &registry.ConsumerRequest{Subjects: []string{tb}}})
	require.NoError(t, err)
	m, err := e.dial(t, bus.PoolRole("a")).Request(bus.PoolRegistrySubject(e.bus.Config, "a"), body, 10*time.Second)
	require.NoError(t, err)
	require.Contains(t, string(m.Data), `names pool \"b\" on pool \"a\"'s subject`)
	_, err = e.bus.Calls.Consumer(ctx, e.bus.Config.PoolConsumer("b"))
	require.ErrorIs(t, err, jetstream.ErrConsumerNotFound, "pool b's consumer was never made")

	// Deleted: made again, as declared, on the next request.
	require.NoError(t, e.bus.Calls.DeleteConsumer(ctx, name))
	_, err = a.Ensure(ctx, bus.PoolConfig{Name: "a", Type: native, Subjects: []string{ta}, MaxDeliver: 3})
	require.NoError(t, err)
	cons, err = e.bus.Calls.Consumer(ctx, name)
	require.NoError(t, err)
	require.Equal(t, 3, cons.CachedInfo().Config.MaxDeliver)
}

// A shadow consumer is made only over the replays of tools the asking
// pool holds, or whose holder's signing key it holds (enrolled for the
// holder's pool): pool a's credential and key cannot have a consumer
// made over pool b's replays, which carry b's calls' arguments. Pool
// b's own shadow worker (its key, a pool of its own) gets one.
func TestShadowConsumersReachTheirPoolsReplaysOnly(t *testing.T) {
	t.Parallel()
	e := startAnnounce(t, "a", "b")
	ctx := t.Context()
	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	s := e.bus.Subjects
	ka, kb := e.poolKey(t, "a", "shadowa"), e.poolKey(t, "b", "shadowb")
	a := e.workerKey(t, bus.PoolRole("a"), "a", native, ka)
	b := e.workerKey(t, bus.PoolRole("b"), "b", native, kb)
	require.NoError(t, a.Publish(ctx, []*toolwirev1.ToolSpec{spec("ta", "Pool a's tool.")}, false))
	require.NoError(t, b.Publish(ctx, []*toolwirev1.ToolSpec{spec("tb", "Pool b's tool.")}, false))
	_, err := b.Ensure(ctx, bus.PoolConfig{Name: "b", Type: native, Subjects: []string{s.ToolSubject(native, "builtin", "tb")}})
	require.NoError(t, err)
	replay := s.Shadow(native, "acme", "builtin", "tb")
	_, err = e.bus.JS.Publish(ctx, replay, []byte(`pool b's replayed call, its arguments included`))
	require.NoError(t, err)

	shadowTB := s.ShadowToolSubject(native, "builtin", "tb")
	for what, subject := range map[string]string{
		"defined by":    shadowTB,
		"has no source": s.ShadowToolSubject(native, "builtin", "unclaimed"),
	} {
		_, err := a.Ensure(ctx, bus.PoolConfig{Name: "a", Type: native, Shadow: true, Subjects: []string{subject}})
		require.ErrorIs(t, err, registry.ErrRefused, what)
		require.ErrorContains(t, err, what)
	}
	// Nor through the any-pool worker credential, signing with a's key.
	shadowA := e.workerKey(t, bus.RoleWorker, "shadowa", native, ka)
	_, err = shadowA.Ensure(ctx, bus.PoolConfig{Name: "shadowa", Type: native, Shadow: true, Subjects: []string{shadowTB}})
	require.ErrorIs(t, err, registry.ErrRefused)
	require.ErrorContains(t, err, "not enrolled for pool \"b\"")
	for _, pool := range []string{"a", "shadowa"} {
		_, err = e.bus.Calls.Consumer(ctx, e.bus.Config.PoolConsumer(pool))
		require.ErrorIs(t, err, jetstream.ErrConsumerNotFound, "no consumer of pool %s over b's replays", pool)
	}

	// Pool b's shadow worker: b's key, a pool of its own.
	shadowB := e.workerKey(t, bus.RoleWorker, "shadowb", native, kb)
	name, err := shadowB.Ensure(ctx, bus.PoolConfig{Name: "shadowb", Type: native, Shadow: true, Subjects: []string{shadowTB}})
	require.NoError(t, err)
	cons, err := e.bus.Calls.Consumer(ctx, name)
	require.NoError(t, err)
	require.Equal(t, []string{shadowTB}, bus.ConsumerFilters(cons.CachedInfo().Config))
}

// A pool named <x>-<type> is the <type> part of pool x (its credential
// reaches it): the dispatchers refuse it anything, claim or consumer,
// for tools of another type.
func TestPoolPartsRunTheirTypeOnly(t *testing.T) {
	t.Parallel()
	e := startAnnounce(t, "a")
	ctx := t.Context()
	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	w := e.workerAs(t, bus.PoolRole("a"), "a-sandbox", native)
	err := w.Publish(ctx, []*toolwirev1.ToolSpec{spec("tx", "A native tool.")}, false)
	require.ErrorIs(t, err, registry.ErrRefused)
	require.ErrorContains(t, err, `the sandbox part of pool "a"`)
	_, err = w.Ensure(ctx, bus.PoolConfig{Name: "a-sandbox", Type: native, Subjects: []string{e.bus.Subjects.ToolSubject(native, "builtin", "tx")}})
	require.ErrorIs(t, err, registry.ErrRefused)
	_, err = e.bus.Registry.Get(ctx, registry.SourceKey("tx"))
	require.ErrorIs(t, err, jetstream.ErrKeyNotFound)

	ok := e.workerAs(t, bus.PoolRole("a"), "a-native", native)
	require.NoError(t, ok.Publish(ctx, []*toolwirev1.ToolSpec{spec("tx", "A native tool.")}, false))
}

// The README's replay flow: the tools of the dispatcher's in-process pool
// (native, enrolled with the dispatcher's key) are replayed on a shadow
// worker that signs with a key the dispatcher trusts for pool native —
// the local worker key, trusted for every pool, or a key of its own
// listed in --worker-keys for native. A key not trusted for native is
// still refused.
func TestShadowWorkersReplayInProcessTools(t *testing.T) {
	t.Parallel()
	e := startAnnounce(t)
	ctx := t.Context()
	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	s := e.bus.Subjects
	dk, err := signing.NewKey()
	require.NoError(t, err)
	require.NoError(t, registry.EnrolDispatcher(ctx, e.bus.Registry, dk.Public(), "dispatcher-1"))
	inProcess := registry.PoolWriter{Writer: registry.NewRegistrar(e.bus, slog.New(slog.DiscardHandler), nil, "dispatcher-1"),
		Pool: "native", Type: native, Worker: "dispatcher-1", Signer: dk.Public()}
	require.NoError(t, inProcess.Publish(ctx, []*toolwirev1.ToolSpec{spec("echo", "Echoes.")}, false))
	_, err = inProcess.Ensure(ctx, bus.PoolConfig{Name: "native", Type: native, Subjects: []string{s.ToolSubject(native, "builtin", "echo")}})
	require.NoError(t, err)
	replays := []string{s.ShadowToolSubject(native, "builtin", "echo")}

	// ./bin/worker --shadow on the dispatcher's machine: the local key.
	local := e.worker(t, "shadow-native", native)
	name, err := local.Ensure(ctx, bus.PoolConfig{Name: "shadow-native", Type: native, Shadow: true, Subjects: replays})
	require.NoError(t, err)
	require.NoError(t, e.bus.Calls.DeleteConsumer(ctx, name))
	// A shadow worker with a key of its own, trusted for pool native.
	own := e.workerKey(t, bus.RoleWorker, "replays", native, e.poolKey(t, "native", "replays"))
	_, err = own.Ensure(ctx, bus.PoolConfig{Name: "replays", Type: native, Shadow: true, Subjects: replays})
	require.NoError(t, err)
	// A key trusted for its own shadow pool only.
	other := e.workerKey(t, bus.RoleWorker, "others", native, e.poolKey(t, "others"))
	_, err = other.Ensure(ctx, bus.PoolConfig{Name: "others", Type: native, Shadow: true, Subjects: replays})
	require.ErrorIs(t, err, registry.ErrRefused)
	require.ErrorContains(t, err, `not enrolled for pool "native"`)
}

// A pool's consumer is live or shadow, never both: a shadow request on a
// live pool's name (its own tools' replays) is refused, and so is a live
// request on a shadow pool's name; before, the filters merged, so that
// live workers ran replays (their side effects included) and the shadow
// worker live calls. A shadow pool is never named as the live pool of the
// tools it replays. An existing shadow consumer is checked against the
// asking key as a whole: a key trusted for pool a cannot join (and so
// fetch from) a shadow consumer that already filters pool b's replays.
func TestShadowAndLiveConsumersNeverMerge(t *testing.T) {
	t.Parallel()
	e := startAnnounce(t, "a", "b")
	ctx := t.Context()
	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	s := e.bus.Subjects
	ka, kb := e.poolKey(t, "a"), e.poolKey(t, "b", "replays")
	a := e.workerKey(t, bus.PoolRole("a"), "a", native, ka)
	b := e.workerKey(t, bus.PoolRole("b"), "b", native, kb)
	require.NoError(t, a.Publish(ctx, []*toolwirev1.ToolSpec{spec("ta", "Pool a's tool.")}, false))
	require.NoError(t, b.Publish(ctx, []*toolwirev1.ToolSpec{spec("tb", "Pool b's tool.")}, false))
	ta := s.ToolSubject(native, "builtin", "ta")
	name, err := a.Ensure(ctx, bus.PoolConfig{Name: "a", Type: native, Subjects: []string{ta}})
	require.NoError(t, err)

	_, err = a.Ensure(ctx, bus.PoolConfig{Name: "a", Type: native, Shadow: true, Subjects: []string{s.ShadowToolSubject(native, "builtin", "ta")}})
	require.ErrorIs(t, err, registry.ErrRefused)
	cons, err := e.bus.Calls.Consumer(ctx, name)
	require.NoError(t, err)
	require.Equal(t, []string{ta}, bus.ConsumerFilters(cons.CachedInfo().Config), "the live consumer filters live calls only")
	// Nor on the live pool's name while its consumer is missing.
	require.NoError(t, e.bus.Calls.DeleteConsumer(ctx, name))
	_, err = a.Ensure(ctx, bus.PoolConfig{Name: "a", Type: native, Shadow: true, Subjects: []string{s.ShadowToolSubject(native, "builtin", "ta")}})
	require.ErrorIs(t, err, registry.ErrRefused)
	require.ErrorContains(t, err, "a name of its own")
	_, err = a.Ensure(ctx, bus.PoolConfig{Name: "a", Type: native, Subjects: []string{ta}})
	require.NoError(t, err)

	// Pool b's shadow worker (b's key) makes shadow pool "replays"; a
	// live request on that name is refused.
	shadowB := e.workerKey(t, bus.RoleWorker, "replays", native, kb)
	shadowTB := s.ShadowToolSubject(native, "builtin", "tb")
	name, err = shadowB.Ensure(ctx, bus.PoolConfig{Name: "replays", Type: native, Shadow: true, Subjects: []string{shadowTB}})
	require.NoError(t, err)
	require.NoError(t, shadowB.Publish(ctx, []*toolwirev1.ToolSpec{spec("tr", "A live tool of pool replays.")}, false))
	_, err = shadowB.Ensure(ctx, bus.PoolConfig{Name: "replays", Type: native, Subjects: []string{s.ToolSubject(native, "builtin", "tr")}})
	require.ErrorIs(t, err, registry.ErrRefused)
	require.ErrorContains(t, err, "live or shadow")

	// Pool a's key, trusted for shadow pool "replays" too (b's key is
	// enrolled for it already), asks for that shadow pool over a's
	// replays: it would fetch b's replays too.
	require.NoError(t, os.WriteFile(filepath.Join(e.trustDir, "replays.pub"), []byte(ka.Public()+"\n"), 0o600))
	shadowA := e.workerKey(t, bus.RoleWorker, "replays", native, ka)
	_, err = shadowA.Ensure(ctx, bus.PoolConfig{Name: "replays", Type: native, Shadow: true, Subjects: []string{s.ShadowToolSubject(native, "builtin", "ta")}})
	require.ErrorIs(t, err, registry.ErrRefused)
	require.ErrorContains(t, err, `not enrolled for pool "b"`)
	cons, err = e.bus.Calls.Consumer(ctx, name)
	require.NoError(t, err)
	require.Equal(t, []string{shadowTB}, bus.ConsumerFilters(cons.CachedInfo().Config))
}

// A live pool's consumer that an earlier version let a shadow worker of
// the same name join (live and replay filters on one consumer) is not a
// crash loop after the upgrade: the live pool's next ensure drops the
// replay filters (its workers would run replays) and the pool starts.
func TestUpgradeDropsReplaysFromALivePoolsConsumer(t *testing.T) {
	t.Parallel()
	e := startAnnounce(t, "a")
	ctx := t.Context()
	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	s := e.bus.Subjects
	a := e.workerKey(t, bus.PoolRole("a"), "a", native, e.poolKey(t, "a"))
	require.NoError(t, a.Publish(ctx, []*toolwirev1.ToolSpec{spec("ta", "Pool a's tool.")}, false))
	ta := s.ToolSubject(native, "builtin", "ta")
	name, err := a.Ensure(ctx, bus.PoolConfig{Name: "a", Type: native, Subjects: []string{ta}})
	require.NoError(t, err)

	// What the previous version made of `worker --shadow --pool a`.
	cons, err := e.bus.Calls.Consumer(ctx, name)
	require.NoError(t, err)
	mixed := cons.CachedInfo().Config
	mixed.FilterSubject, mixed.FilterSubjects = "", []string{ta, s.ShadowToolSubject(native, "builtin", "ta")}
	_, err = e.bus.Calls.UpdateConsumer(ctx, mixed)
	require.NoError(t, err)

	_, err = a.Ensure(ctx, bus.PoolConfig{Name: "a", Type: native, Subjects: []string{ta}})
	require.NoError(t, err, "the live pool starts")
	cons, err = e.bus.Calls.Consumer(ctx, name)
	require.NoError(t, err)
	require.Equal(t, []string{ta}, bus.ConsumerFilters(cons.CachedInfo().Config), "no replay filter left on the live consumer")
}
