package registry_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// spec is a stamped native spec of name described by desc.
func spec(name, desc string) *toolwirev1.ToolSpec {
	return registry.Stamp(&toolwirev1.ToolSpec{Name: name, Description: desc, Provider: "builtin",
		Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, Config: &toolwirev1.ToolSpec_Native{Native: &toolwirev1.NativeConfig{}},
		InputSchemaJson: `{"type":"object"}`})
}

// held answers Claim's question with live, and counts it.
type held struct {
	live  bool
	asked int
}

func (h *held) opts(grace time.Duration) registry.ClaimOptions {
	return registry.ClaimOptions{Grace: grace, Held: func(context.Context, registry.Source) (bool, error) {
		h.asked++
		return h.live, nil
	}}
}

func TestClaim(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx, kv := t.Context(), env.Bus.Registry
	native := registry.Source{Pool: "native", Subject: "toolwire.call.native.*.builtin.echo", Worker: "w1"}
	other := registry.Source{Pool: "http", Subject: "toolwire.call.http.*.builtin.echo", Worker: "w2"}
	v1, v2 := spec("echo", "first"), spec("echo", "second")
	h := &held{live: true}

	require.NoError(t, registry.Claim(ctx, kv, v1, native, h.opts(-1)), "the first claimant takes the name")
	_, err := registry.Publish(ctx, kv, []*toolwirev1.ToolSpec{v1})
	require.NoError(t, err)
	require.NoError(t, registry.Claim(ctx, kv, v2, native, h.opts(-1)), "the same pool brings a new version (rolling upgrade)")
	require.NoError(t, registry.Claim(ctx, kv, v1, other, h.opts(-1)), "the same definition from elsewhere changes nothing")
	require.Zero(t, h.asked)

	err = registry.Claim(ctx, kv, v2, other, h.opts(-1))
	require.ErrorIs(t, err, registry.ErrClaimed)
	var ce *registry.ClaimError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, native, ce.Holder)
	require.Equal(t, other, ce.Claimant)
	require.ErrorContains(t, err, `pool "native" (worker w1`)
	require.ErrorContains(t, err, `pool "http" (worker w2`)
	require.Equal(t, 1, h.asked)

	// Within the grace period a claim holds without asking: its pool may
	// not have extended its consumer yet.
	h.live = false
	require.ErrorIs(t, registry.Claim(ctx, kv, v2, other, h.opts(0)), registry.ErrClaimed)
	require.Equal(t, 1, h.asked)
	// A holder that no longer serves the tool (its consumer deleted or
	// narrowed by an operator) is taken over.
	require.NoError(t, registry.Claim(ctx, kv, v2, other, h.opts(-1)))
	require.Equal(t, 2, h.asked)
	h.live = true
	require.ErrorIs(t, registry.Claim(ctx, kv, spec("echo", "third"), native, h.opts(-1)), registry.ErrClaimed,
		"now the old pool is the other one")
}

// The Store lists tools only: the sources recorded beside them are not
// tools.
func TestStoreIgnoresSources(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx, kv := t.Context(), env.Bus.Registry
	v1 := spec("echo", "first")
	require.NoError(t, registry.Claim(ctx, kv, v1, registry.Source{Pool: "native", Subject: "s"}, (&held{}).opts(-1)))
	_, err := registry.Publish(ctx, kv, []*toolwirev1.ToolSpec{v1})
	require.NoError(t, err)
	store := registry.NewStore(kv, slog.New(slog.DiscardHandler))
	require.NoError(t, store.Start(ctx))
	t.Cleanup(func() { _ = store.Stop(context.Background()) })
	entries := store.List(registry.Filter{})
	require.Len(t, entries, 1)
	require.Equal(t, "echo", entries[0].Spec.Name)
}

// A tool whose pool's consumer is missing is not taken over at once: the
// first claim that finds the holder not serving records it (refused),
// and another pool takes the tool only once the holder has not served it
// for the grace period. A holder whose consumer is put back (its worker
// repairs it within seconds) keeps the tool, and its absence is
// forgotten: a later absence starts again. Before, a pool claiming in the
// moment another's consumer was missing took its tools, and the holder's
// repair was then refused.
func TestClaimWaitsOutAMissingConsumer(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx, kv := t.Context(), env.Bus.Registry
	b := registry.Source{Pool: "b", Subject: "toolwire.call.native.*.builtin.tb", Worker: "wb"}
	a := registry.Source{Pool: "a", Subject: "toolwire.call.native.*.builtin.tb", Worker: "wa"}
	const grace = 300 * time.Millisecond
	h := &held{live: true}
	require.NoError(t, registry.Claim(ctx, kv, spec("tb", "b's"), b, h.opts(grace)))
	evil := spec("tb", "a's")
	// olderThanGrace waits until the source record is older than grace.
	olderThanGrace := func() {
		require.Eventually(t, func() bool {
			e, err := kv.Get(ctx, registry.SourceKey("tb"))
			return err == nil && time.Since(e.Created()) > grace
		}, 10*time.Second, 20*time.Millisecond)
	}
	olderThanGrace()

	// b's consumer is gone: a's claim records it, and is refused.
	h.live = false
	err := registry.Claim(ctx, kv, evil, a, h.opts(grace))
	require.ErrorIs(t, err, registry.ErrClaimed, "taken over in the moment b's consumer was missing")
	var ce *registry.ClaimError
	require.ErrorAs(t, err, &ce)
	require.False(t, ce.Holder.MissingSince.IsZero())
	require.ErrorContains(t, err, "not serving it since")

	// b's worker puts its consumer back (through a dispatcher, which
	// forgets the absence): b keeps the tool.
	h.live = true
	registry.ServingAgain(ctx, kv, "b", []string{"tb"})
	olderThanGrace()
	require.ErrorIs(t, registry.Claim(ctx, kv, evil, a, h.opts(grace)), registry.ErrClaimed)
	// Missing again later: the absence starts again, no takeover at once.
	h.live = false
	require.ErrorIs(t, registry.Claim(ctx, kv, evil, a, h.opts(grace)), registry.ErrClaimed)
	e, err := kv.Get(ctx, registry.SourceKey("tb"))
	require.NoError(t, err)
	require.Contains(t, string(e.Value()), `"pool":"b"`)

	// Missing for the grace period: a takes it over.
	olderThanGrace()
	require.NoError(t, registry.Claim(ctx, kv, evil, a, h.opts(grace)))
	e, err = kv.Get(ctx, registry.SourceKey("tb"))
	require.NoError(t, err)
	require.Contains(t, string(e.Value()), `"pool":"a"`)
}

// A holder's consumer put back while a claim records its absence does
// not leave the absence recorded: the claim found it missing, the
// holder's consumer came back and its ServingAgain found nothing to
// forget, then the claim wrote missing_since. Left so, a later brief
// absence would be taken over at once. The claim looks again after it
// records the absence and forgets it if the holder serves.
func TestClaimForgetsAnAbsenceThatEndedWhileRecorded(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx, kv := t.Context(), env.Bus.Registry
	b := registry.Source{Pool: "b", Subject: "toolwire.call.native.*.builtin.tb", Worker: "wb"}
	a := registry.Source{Pool: "a", Subject: "toolwire.call.native.*.builtin.tb", Worker: "wa"}
	require.NoError(t, registry.Claim(ctx, kv, spec("tb", "b's"), b, (&held{live: true}).opts(-1)))
	live := false
	opts := registry.ClaimOptions{Grace: time.Millisecond, Held: func(ctx context.Context, _ registry.Source) (bool, error) {
		if !live { // b's consumer is put back now, after this answer
			live = true
			registry.ServingAgain(ctx, kv, "b", []string{"tb"})
			return false, nil
		}
		return true, nil
	}}
	require.Eventually(t, func() bool {
		e, err := kv.Get(ctx, registry.SourceKey("tb"))
		return err == nil && time.Since(e.Created()) > time.Millisecond
	}, 10*time.Second, 5*time.Millisecond)
	require.ErrorIs(t, registry.Claim(ctx, kv, spec("tb", "a's"), a, opts), registry.ErrClaimed)
	e, err := kv.Get(ctx, registry.SourceKey("tb"))
	require.NoError(t, err)
	require.Contains(t, string(e.Value()), `"pool":"b"`)
	require.NotContains(t, string(e.Value()), "missing_since", "b serves the tool: no absence recorded")
}
