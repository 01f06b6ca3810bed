package maintenance

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolwire/toolwire/internal/bus"
)

// Coverage is the set of filters of the pool consumers of the calls
// stream: which call subjects some pool would deliver. The sweeper ends
// the calls on subjects it does not cover; admission's pool check
// (internal/dispatch) refuses them.
type Coverage struct {
	exact map[string]bool // every filter, as written
	other []string        // filters of shapes Covers does not look up
}

// NewCoverage returns the coverage of the filters.
func NewCoverage(filters ...string) Coverage {
	c := Coverage{exact: map[string]bool{}}
	for _, f := range filters {
		c.add(f)
	}
	return c
}

// ListCoverage lists the filters of b's pool consumers. Consumers that are
// not pools' (an audit's, a watcher's) deliver to no worker and do not
// count.
func ListCoverage(ctx context.Context, b *bus.Bus) (Coverage, error) {
	c := NewCoverage()
	lister := b.Calls.ListConsumers(ctx)
	for ci := range lister.Info() {
		if !b.Config.IsPoolConsumer(ci) {
			continue // audits, watchers: they deliver to no worker
		}
		for _, f := range bus.ConsumerFilters(ci.Config) {
			c.add(f)
		}
	}
	if err := lister.Err(); err != nil {
		return c, fmt.Errorf("list pool consumers: %w", err)
	}
	return c, nil
}

func (c *Coverage) add(f string) {
	c.exact[f] = true
	if !c.lookedUp(f) {
		c.other = append(c.other, f)
	}
}

// lookedUp reports whether Covers finds filter f by lookup: one tool's
// calls (<prefix>.call.<type>.*.<provider>.<tool>), every call of a type
// (<prefix>.call.<type>.>) or a literal subject.
func (c Coverage) lookedUp(f string) bool {
	if !strings.ContainsAny(f, "*>") {
		return true
	}
	toks := strings.Split(f, ".")
	switch {
	case len(toks) == 6 && toks[3] == "*":
		return !strings.ContainsAny(toks[0]+toks[1]+toks[2]+toks[4]+toks[5], "*>")
	case len(toks) == 4 && toks[3] == ">":
		return !strings.ContainsAny(toks[0]+toks[1]+toks[2], "*>")
	}
	return false
}

// PerTenant reports whether some filter is of a shape Covers does not
// look up (one naming a tenant, say): then whether a tool's calls are
// covered may depend on the tenant. Otherwise every filter is a tool's, a
// type's or a literal subject, and one tenant answers for all.
func (c Coverage) PerTenant() bool { return len(c.other) > 0 }

// Covers reports whether some pool consumer's filter matches subject.
func (c Coverage) Covers(subject string) bool {
	if c.exact[subject] {
		return true
	}
	toks := strings.Split(subject, ".")
	if len(toks) >= 4 && c.exact[strings.Join(toks[:3], ".")+".>"] {
		return true
	}
	if len(toks) == 6 {
		toks[3] = "*"
		if c.exact[strings.Join(toks, ".")] {
			return true
		}
	}
	for _, f := range c.other {
		if bus.SubjectMatches(f, subject) {
			return true
		}
	}
	return false
}
