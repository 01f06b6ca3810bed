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
