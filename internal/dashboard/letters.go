package dashboard

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/toolwire/toolwire/internal/dlq"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// maxListedLetters bounds the dead letters the dashboard holds: the
// newest. Pages over the DLQ see these.
const maxListedLetters = 10_000

// letters is the DLQ as the dashboard last read it, shared by every page
// view: a view costs one stream info while no letter was written or
// removed since (dlq.State), and a full read (newest maxListedLetters)
// only then, one at a time however many views wait. Each letter's
// redacted view (dlq.Shown, the costly part) is made once.
type letters struct {
	q *dlq.Queue

	mu    sync.Mutex // held while reading: concurrent views share a read
	state dlq.State
	read  bool
	all   []*shownLetter // oldest first
}

type shownLetter struct {
	*dlq.Letter
	once     sync.Once
	shown    *toolwirev1.DeadLetter
	withheld int
}

// list returns the newest maxListedLetters dead letters, oldest first.
func (c *letters) list(ctx context.Context) ([]*shownLetter, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := c.q.State(ctx)
	if err != nil {
		return nil, err
	}
	if c.read && st == c.state {
		return c.all, nil
	}
	ls, err := c.q.List(ctx, dlq.ListOptions{Limit: maxListedLetters})
	if err != nil {
		return nil, fmt.Errorf("reading the dead letters: %w", err)
	}
	old := make(map[uint64]*shownLetter, len(c.all))
	for _, l := range c.all {
		old[l.Seq] = l
	}
	all := make([]*shownLetter, 0, len(ls))
	for _, l := range ls {
		if o := old[l.Seq]; o != nil {
			all = append(all, o) // its redacted view is kept
			continue
		}
		all = append(all, &shownLetter{Letter: l})
	}
	c.state, c.read, c.all = st, true, all
	return all, nil
}

// view is the letter's redacted view (dlq.Shown), made once.
func (c *letters) view(ctx context.Context, l *shownLetter) (*toolwirev1.DeadLetter, int) {
	l.once.Do(func() {
		// Kept for every later view: not cut short by this one's client.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		l.shown, l.withheld = c.q.Shown(ctx, l.Letter)
	})
	return l.shown, l.withheld
}
