package tool_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestEmitIntent(t *testing.T) {
	t.Parallel()

	tl := tool.Must(tool.New("end", func(ctx context.Context, _ searchIn) (string, error) {
		if err := tool.EmitIntent(ctx, "SET_STATE", map[string]any{"key": "k", "value": 1}); err != nil {
			return "", err
		}
		if err := tool.EmitIntent(ctx, "acme.reindex", json.RawMessage(`{ "index" : "a" }`)); err != nil {
			return "", err
		}
		return "done", tool.EmitIntent(ctx, "END_SESSION", nil)
	}, tool.WithIntents("SET_STATE", "acme.reindex", "END_SESSION")))

	res, err := tl.Invoke(context.Background(), nil)
	require.NoError(t, err)
	requireResult(t, &tool.Result{
		Content: []*toolwirev1.Content{tool.Text("done")},
		Intents: []*toolwirev1.Intent{
			{Id: "i1", Type: "SET_STATE", PayloadJson: `{"key":"k","value":1}`},
			{Id: "i2", Type: "acme.reindex", PayloadJson: `{"index":"a"}`},
			{Id: "i3", Type: "END_SESSION"},
		},
	}, res)

	// Every invocation has its own sequence.
	res, err = tl.Invoke(context.Background(), nil)
	require.NoError(t, err)
	require.Equal(t, "i1", res.Intents[0].GetId())
}

func TestEmitIntentAppendsToResultIntents(t *testing.T) {
	t.Parallel()

	shared := &tool.Result{Intents: []*toolwirev1.Intent{{Id: "own", Type: "NOTIFY"}}}
	tl := tool.Must(tool.New("t", func(ctx context.Context, _ searchIn) (*tool.Result, error) {
		return shared, tool.EmitIntent(ctx, "END_SESSION", nil)
	}))
	for range 2 {
		res, err := tl.Invoke(context.Background(), nil)
		require.NoError(t, err)
		require.Len(t, res.Intents, 2)
		require.Equal(t, "own", res.Intents[0].GetId())
		require.Equal(t, "END_SESSION", res.Intents[1].GetType())
	}
	require.Len(t, shared.Intents, 1, "the function's own Result is not modified")
}

func TestEmitIntentConcurrently(t *testing.T) {
	t.Parallel()

	const n = 50
	tl := tool.Must(tool.New("t", func(ctx context.Context, _ searchIn) (string, error) {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() { errs <- tool.EmitIntent(ctx, "EMIT_EVENT", i) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return "", err
			}
		}
		return "", nil
	}))
	res, err := tl.Invoke(context.Background(), nil)
	require.NoError(t, err)
	require.Len(t, res.Intents, n)
	for i, in := range res.Intents {
		require.Equal(t, "i"+strconv.Itoa(i+1), in.GetId(), "ids follow the emit order")
	}
}

func TestEmitIntentFailedCallReturnsNone(t *testing.T) {
	t.Parallel()

	tl := tool.Must(tool.New("t", func(ctx context.Context, _ searchIn) (string, error) {
		_ = tool.EmitIntent(ctx, "END_SESSION", nil)
		return "", errFailed
	}))
	res, err := tl.Invoke(context.Background(), nil)
	require.ErrorIs(t, err, errFailed)
	require.Nil(t, res)
}

func TestEmitIntentErrors(t *testing.T) {
	t.Parallel()

	t.Run("outside an invocation", func(t *testing.T) {
		t.Parallel()
		require.ErrorIs(t, tool.EmitIntent(context.Background(), "END_SESSION", nil), tool.ErrNoInvocation)
	})

	t.Run("after the invocation returned", func(t *testing.T) {
		t.Parallel()
		leaked := make(chan context.Context, 1)
		tl := tool.Must(tool.New("t", func(ctx context.Context, _ searchIn) (string, error) {
			leaked <- ctx
			return "", nil
		}))
		res, err := tl.Invoke(context.Background(), nil)
		require.NoError(t, err)
		require.ErrorIs(t, tool.EmitIntent(<-leaked, "END_SESSION", nil), tool.ErrNoInvocation)
		require.Empty(t, res.Intents)
	})

	for name, emit := range map[string]func(ctx context.Context) error{
		"empty type":          func(ctx context.Context) error { return tool.EmitIntent(ctx, "", nil) },
		"unencodable payload": func(ctx context.Context) error { return tool.EmitIntent(ctx, "X", make(chan int)) },
		"invalid raw JSON":    func(ctx context.Context) error { return tool.EmitIntent(ctx, "X", json.RawMessage(`{`)) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var emitErr error
			tl := tool.Must(tool.New("t", func(ctx context.Context, _ searchIn) (string, error) {
				emitErr = emit(ctx)
				return "", nil
			}))
			res, err := tl.Invoke(context.Background(), nil)
			require.NoError(t, err)
			require.Error(t, emitErr)
			require.Empty(t, res.Intents, "a rejected intent is not recorded")
		})
	}
}
