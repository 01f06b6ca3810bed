package tool_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// chunks is a tool.PartialReporter that keeps what it is given, as a
// worker's reporter would publish it.
type chunks struct {
	mu   sync.Mutex
	seqs []uint32
	text []string
	// beats counts the heartbeats of refused chunks.
	beats int
}

func (c *chunks) Progress(string, float64) {}

func (c *chunks) Heartbeat() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.beats++
}

func (c *chunks) Partial(seq uint32, content []*toolwirev1.Content) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seqs = append(c.seqs, seq)
	var b strings.Builder
	for _, x := range content {
		b.WriteString(x.GetText().GetText())
	}
	c.text = append(c.text, b.String())
	return nil
}

// progressOnly takes progress and no partial output.
type progressOnly struct{}

func (progressOnly) Progress(string, float64) {}

func TestPartialNumbersChunksInOrder(t *testing.T) {
	t.Parallel()
	rep := &chunks{}
	ctx := tool.WithReporter(t.Context(), rep)
	require.NoError(t, tool.PartialText(ctx, "a"))
	require.NoError(t, tool.Partial(ctx, tool.Text("b"), tool.Text("c")))
	require.NoError(t, tool.Partial(ctx), "no blocks: nothing sent")
	require.Equal(t, []uint32{1, 2}, rep.seqs)
	require.Equal(t, []string{"a", "bc"}, rep.text)

	// Each reporter (a worker installs one per attempt) counts afresh.
	again := &chunks{}
	require.NoError(t, tool.PartialText(tool.WithReporter(t.Context(), again), "x"))
	require.Equal(t, []uint32{1}, again.seqs)
}

func TestPartialCopiesTheBlocks(t *testing.T) {
	t.Parallel()
	var got []*toolwirev1.Content
	rep := &keep{got: &got}
	block := tool.Text("before")
	require.NoError(t, tool.Partial(tool.WithReporter(t.Context(), rep), block))
	block.GetText().Text = "after"
	require.Equal(t, "before", got[0].GetText().GetText())
}

type keep struct{ got *[]*toolwirev1.Content }

func (keep) Progress(string, float64) {}
func (keep) Heartbeat()               {}
func (k keep) Partial(_ uint32, content []*toolwirev1.Content) error {
	*k.got = append(*k.got, content...)
	return nil
}

// A refused chunk counts as a heartbeat: a tool past its bound, still
// calling Partial, is alive.
func TestRefusedPartialIsAHeartbeat(t *testing.T) {
	t.Parallel()
	rep := &chunks{}
	ctx := tool.WithReporter(t.Context(), rep)
	require.ErrorIs(t, tool.PartialText(ctx, strings.Repeat("x", tool.MaxPartialChunkBytes)), tool.ErrPartialTooLarge)
	require.Equal(t, 1, rep.beats)
	for range tool.MaxPartialChunks {
		require.NoError(t, tool.PartialText(ctx, "x"))
	}
	require.ErrorIs(t, tool.PartialText(ctx, "x"), tool.ErrPartialLimit)
	require.ErrorIs(t, tool.PartialText(ctx, "x"), tool.ErrPartialLimit)
	require.Equal(t, 3, rep.beats)
	require.Error(t, tool.Partial(ctx, nil))
	require.Equal(t, 4, rep.beats)
}

// closed is a reporter whose attempt has ended.
type closed struct{ partials, progress int }

func (c *closed) Progress(string, float64) { c.progress++ }
func (*closed) Heartbeat()                 {}
func (c *closed) Partial(uint32, []*toolwirev1.Content) error {
	c.partials++
	return tool.ErrPartialClosed
}

// The reporter's refusal reaches the tool; the refused chunk is not
// counted against the bound.
func TestPartialAfterTheAttemptEndedIsRefused(t *testing.T) {
	t.Parallel()
	rep := &closed{}
	ctx := tool.WithReporter(t.Context(), rep)
	require.ErrorIs(t, tool.PartialText(ctx, "late"), tool.ErrPartialClosed)
	require.Equal(t, 1, rep.partials)
}

func TestPartialWithoutAReporterSendsNothing(t *testing.T) {
	t.Parallel()
	require.NoError(t, tool.PartialText(t.Context(), "nobody listens"))
	require.NoError(t, tool.PartialText(tool.WithReporter(t.Context(), progressOnly{}), "progress only"))
	require.Error(t, tool.Partial(tool.WithReporter(t.Context(), &chunks{}), nil), "a nil block")
}

func TestPartialChunkCountIsBounded(t *testing.T) {
	t.Parallel()
	rep := &chunks{}
	ctx := tool.WithReporter(t.Context(), rep)
	for range tool.MaxPartialChunks {
		require.NoError(t, tool.PartialText(ctx, "x"))
	}
	require.ErrorIs(t, tool.PartialText(ctx, "x"), tool.ErrPartialLimit)
	require.ErrorIs(t, tool.PartialText(ctx, "x"), tool.ErrPartialLimit, "and every later chunk")
	require.Len(t, rep.seqs, tool.MaxPartialChunks)
	require.Equal(t, uint32(tool.MaxPartialChunks), rep.seqs[len(rep.seqs)-1])
}

func TestPartialBytesAreBounded(t *testing.T) {
	t.Parallel()
	rep := &chunks{}
	ctx := tool.WithReporter(t.Context(), rep)
	big := strings.Repeat("x", tool.MaxPartialChunkBytes-16)
	sent := 0
	var err error
	for err == nil {
		if err = tool.PartialText(ctx, big); err == nil {
			sent += len(big)
		}
	}
	require.ErrorIs(t, err, tool.ErrPartialLimit)
	require.LessOrEqual(t, sent, tool.MaxPartialBytes)
	require.Greater(t, sent, tool.MaxPartialBytes-tool.MaxPartialChunkBytes)
	require.ErrorIs(t, tool.PartialText(ctx, "small"), tool.ErrPartialLimit, "nothing more is sent")
	require.Len(t, rep.seqs, sent/len(big))
}

func TestPartialChunkSizeIsBounded(t *testing.T) {
	t.Parallel()
	rep := &chunks{}
	ctx := tool.WithReporter(t.Context(), rep)
	err := tool.PartialText(ctx, strings.Repeat("x", tool.MaxPartialChunkBytes))
	require.ErrorIs(t, err, tool.ErrPartialTooLarge)
	require.NotErrorIs(t, err, tool.ErrPartialLimit)
	require.NoError(t, tool.PartialText(ctx, "smaller"), "a later, smaller chunk is sent")
	require.Equal(t, []uint32{1}, rep.seqs)
	require.Equal(t, []string{"smaller"}, rep.text)
}

// Chunks sent by goroutines of one call reach the reporter one at a time,
// numbered in the order they were taken.
func TestPartialIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	rep := &chunks{}
	ctx := tool.WithReporter(t.Context(), rep)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				require.NoError(t, tool.PartialText(ctx, "x"))
			}
		})
	}
	wg.Wait()
	require.Len(t, rep.seqs, 400)
	for i, s := range rep.seqs {
		require.Equal(t, uint32(i+1), s)
	}
}
