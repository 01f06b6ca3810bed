package approvalflow

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestRepublishWithinKeepsAMarginInsideTheWindow(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ window, want time.Duration }{
		{2 * time.Minute, time.Minute},      // the margin, a minute
		{10 * time.Minute, 9 * time.Minute}, // the default window
		{time.Minute, 30 * time.Second},     // at most half the window
		{10 * time.Second, 5 * time.Second},
	} {
		require.Equal(t, c.want, republishWithin(c.window), "window %s", c.window)
	}
}

func TestSameAnswers(t *testing.T) {
	t.Parallel()
	round := func(prev string, answers map[string]string) *toolwirev1.InputRound {
		return &toolwirev1.InputRound{PreviousCallId: prev, ResponsesJson: answers, State: []byte("tool state")}
	}
	for _, c := range []struct {
		name string
		a, b *toolwirev1.InputRound
		same bool
	}{
		{"no round", nil, nil, true},
		{"a round and none", round("c1", nil), nil, false},
		{"an empty round is a round", &toolwirev1.InputRound{}, nil, false},
		{"the same answers", round("c1", map[string]string{"k": `{"action":"accept"}`}),
			round("c1", map[string]string{"k": `{"action":"accept"}`}), true},
		{"the state is not the caller's", round("c1", nil), &toolwirev1.InputRound{PreviousCallId: "c1"}, true},
		{"another call", round("c1", nil), round("c2", nil), false},
		{"other answers", round("c1", map[string]string{"k": `{"action":"accept"}`}),
			round("c1", map[string]string{"k": `{"action":"decline"}`}), false},
		{"an answer more", round("c1", map[string]string{"k": "{}"}), round("c1", map[string]string{"k": "{}", "l": "{}"}), false},
	} {
		require.Equal(t, c.same, sameAnswers(c.a, c.b), c.name)
		require.Equal(t, c.same, sameAnswers(c.b, c.a), c.name+" (swapped)")
	}
}
