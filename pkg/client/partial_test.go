package client_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/pkg/client"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// partialChunks are the seq and text of the PROGRESS events of events
// that carry partial output, in the order they came, and whether each came
// before the FINISHED event.
func partialChunks(t *testing.T, events []*toolwirev1.CallEvent) (seqs []uint32, text []string) {
	t.Helper()
	finished := false
	for _, ev := range events {
		if ev.GetType() == toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED {
			finished = true
		}
		if len(ev.GetPartial()) == 0 {
			continue
		}
		require.False(t, finished, "partial output after the result")
		require.Equal(t, toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS, ev.GetType())
		seqs = append(seqs, ev.GetPartialSeq())
		text = append(text, ev.GetPartial()[0].GetText().GetText())
	}
	return seqs, text
}

// A Watch over Connect streams a call's partial output live, chunk by
// chunk in order, before its result, which partial output leaves as the
// tool returned it: the tool "live" does not return until the watcher has
// seen its last chunk, and "quick" returns at once, so its chunks are
// replayed from the events stream before FINISHED.
func TestWatchStreamsPartialOutput(t *testing.T) {
	t.Parallel()
	const n = 5
	seen := make(chan struct{})
	live := tool.Must(tool.New("live", func(ctx context.Context, _ struct{}) (string, error) {
		for i := range n {
			if err := tool.PartialText(ctx, fmt.Sprintf("chunk %d;", i+1)); err != nil {
				return "", err
			}
		}
		select {
		case <-seen: // the watcher has every chunk: they were streamed during the call
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "the result", nil
	}, tool.ReadOnly()))
	quick := tool.Must(tool.New("quick", func(ctx context.Context, _ struct{}) (string, error) {
		for i := range 20 {
			if err := tool.PartialText(ctx, fmt.Sprintf("chunk %d;", i+1)); err != nil {
				return "", err
			}
		}
		return "the result", nil
	}, tool.ReadOnly()))
	b := setup(t, dispatchtest.Options{Tools: []*tool.Tool{live, quick}})

	t.Run("Live", func(t *testing.T) {
		t.Parallel()
		sub, err := b.client.Submit(t.Context(), "live", map[string]any{})
		require.NoError(t, err)
		var events []*toolwirev1.CallEvent
		err = b.client.Watch(t.Context(), sub.CallID, func(ev *toolwirev1.CallEvent) error {
			events = append(events, ev)
			if ev.GetPartialSeq() == n {
				close(seen)
			}
			return nil
		})
		require.NoError(t, err)
		seqs, text := partialChunks(t, events)
		require.Equal(t, []uint32{1, 2, 3, 4, 5}, seqs)
		require.Equal(t, []string{"chunk 1;", "chunk 2;", "chunk 3;", "chunk 4;", "chunk 5;"}, text)
		res := client.Final(events[len(events)-1])
		require.True(t, res.OK())
		require.Equal(t, "the result", res.Text(), "the result is unchanged")
	})

	t.Run("QuickReplayed", func(t *testing.T) {
		t.Parallel()
		res, err := b.client.Call(t.Context(), "quick", map[string]any{})
		require.NoError(t, err)
		require.Equal(t, "the result", res.Text())
		events, err := watch(t, b.client, res.CallID)
		require.NoError(t, err)
		seqs, text := partialChunks(t, events)
		require.Len(t, seqs, 20, "the worker stores the partial output before the result")
		for i := range seqs {
			require.Equal(t, uint32(i+1), seqs[i])
			require.Equal(t, fmt.Sprintf("chunk %d;", i+1), text[i])
		}
	})
}
