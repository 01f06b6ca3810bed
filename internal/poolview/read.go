package poolview

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolwire/toolwire/internal/bus"
)

// readPools lists the pool consumers of the calls stream.
func (l *Load) readPools(ctx context.Context) error {
	bases := make(map[string]int64, len(l.pools))
	for name, p := range l.pools {
		bases[name] = p.published()
	}
	sent := time.Now()
	seen := map[string]bool{}
	lister := l.bus.Calls.ListConsumers(ctx)
	for ci := range lister.Info() {
		if !strings.HasPrefix(ci.Name, l.poolPrefix) {
			continue // audits, replays: they deliver to no worker
		}
		seen[ci.Name] = true
		p := l.pools[ci.Name]
		if p == nil {
			name := strings.TrimPrefix(ci.Name, l.poolPrefix)
			p = &poolLoad{name: name, consumer: ci.Name, bound: l.cfg.backlogBound(name), waitBound: l.cfg.queueWaitBound(name)}
			l.pools[ci.Name] = p
		}
		l.filters[ci.Name] = bus.ConsumerFilters(ci.Config)
		p.pending.Store(int64(ci.NumPending))
		p.ackPending.Store(int64(ci.NumAckPending))
		p.admittedAtRead.Store(bases[ci.Name])
		p.readAt.Store(sent.UnixNano())
		p.measure(ci.Delivered.Consumer, int64(ci.NumAckPending), sent)
		p.pause.Store(pauseOf(ci))
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("list pool consumers: %w", err)
	}
	for name := range l.pools {
		if !seen[name] {
			delete(l.pools, name) // deleted pool
			delete(l.filters, name)
		}
	}
	return nil
}

// readStores reads the use of every store and of the account.
func (l *Load) readStores(ctx context.Context) error {
	var errs []error
	var uses []storeUse
	for _, s := range l.bus.Config.Stores() {
		st := l.streams[s.Stream]
		if st == nil {
			var err error
			if st, err = l.bus.JS.Stream(ctx, s.Stream); err != nil {
				errs = append(errs, fmt.Errorf("stream %s: %w", s.Stream, err))
				continue
			}
			l.streams[s.Stream] = st
		}
		info, err := st.Info(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("stream %s: %w", s.Stream, err))
			continue
		}
		// The live limit: an operator may have changed it since start-up.
		s.MaxBytes = info.Config.MaxBytes
		uses = append(uses, storeUse{Store: s, bytes: int64(info.State.Bytes)})
	}
	if ai, err := l.bus.JS.AccountInfo(ctx); err != nil {
		errs = append(errs, fmt.Errorf("account info: %w", err))
	} else if ai.Limits.MaxStore > 0 {
		uses = append(uses, storeUse{Store: bus.Store{Name: "account", Stream: "(account)", MaxBytes: ai.Limits.MaxStore, Use: bus.UsedByEveryCall},
			bytes: int64(ai.Store), account: true})
	}
	if len(uses) > 0 || len(errs) == 0 {
		l.stores = uses
	}
	return errors.Join(errs...)
}
