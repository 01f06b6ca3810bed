package policystore

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/policy"
)

// DenyAllVersion is the version of the built-in policy a scope gets when
// its document cannot be loaded and it never had one.
var DenyAllVersion = denyAll.Version()

// SetPruneGrace sets how recently written a document of s must be to be
// kept whatever the history says.
func SetPruneGrace(s *Store, d time.Duration) { s.grace = d }

// EndWatchOnce makes h's first watch one whose updates end when the
// returned function is called (as when its subscription closes); the
// watches after it are real.
func EndWatchOnce(h *Holder) (end func()) {
	var once sync.Once
	stop := make(chan struct{})
	first := true
	h.watch = func(ctx context.Context) (jetstream.KeyWatcher, error) {
		w, err := h.kv.Watch(ctx, currentPrefix+">")
		if err != nil || !first {
			return w, err
		}
		first = false
		return &endingWatcher{KeyWatcher: w, stop: stop, out: make(chan jetstream.KeyValueEntry)}, nil
	}
	return func() { once.Do(func() { close(stop) }) }
}

// endingWatcher forwards a real watch's updates until stop is closed,
// then closes its own.
type endingWatcher struct {
	jetstream.KeyWatcher
	stop  chan struct{}
	out   chan jetstream.KeyValueEntry
	start sync.Once
}

func (w *endingWatcher) Updates() <-chan jetstream.KeyValueEntry {
	w.start.Do(func() {
		go func() {
			defer close(w.out)
			for {
				select {
				case <-w.stop:
					return
				case e, ok := <-w.KeyWatcher.Updates():
					if !ok {
						return
					}
					select {
					case w.out <- e:
					case <-w.stop:
						return
					}
				}
			}
		}()
	})
	return w.out
}

// SetParse replaces how h parses a document (before Start).
func SetParse(h *Holder, parse func([]byte) (*policy.Policy, error)) { h.parse = parse }

// LivePeers names the Holders h heard say they are alive.
func LivePeers(h *Holder) []string { return h.livePeers() }

// FleetAsk is the body of an ask of the fleet (WaitFleet's) for scope's
// change of revision, the asker waiting waitMS for a final answer.
func FleetAsk(scope Scope, version string, revision uint64, waitMS int64) []byte {
	b, _ := json.Marshal(fleetAsk{Scope: scope.token(), Version: version, Revision: revision, WaitMS: waitMS})
	return b
}
