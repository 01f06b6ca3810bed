package worker

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// checkSpecs refuses specs this worker cannot publish as a whole: a tool
// of an executor type none of its pools runs (registered, its calls would
// be admitted with no consumer and never delivered), and two tools of one
// name (one would silently replace the other in the registry).
func (w *Worker) checkSpecs(specs []*toolwirev1.ToolSpec) error {
	seen := make(map[string]*toolwirev1.ToolSpec, len(specs))
	for _, s := range specs {
		if _, ok := w.poolOf(s.Executor); !ok {
			return fmt.Errorf("worker: tool %q is a %s tool, but this worker serves no %s pool: nothing would run its calls",
				s.Name, bus.TypeToken(s.Executor), bus.TypeToken(s.Executor))
		}
		if prev, ok := seen[s.Name]; ok {
			return fmt.Errorf("worker: tool %q is defined twice (a %s tool of provider %q and a %s tool of provider %q): rename one",
				s.Name, bus.TypeToken(prev.Executor), prev.Provider, bus.TypeToken(s.Executor), s.Provider)
		}
		seen[s.Name] = s
	}
	return nil
}

// poolOf returns the pool of executor type t.
func (w *Worker) poolOf(t toolwirev1.ExecutorType) (Pool, bool) {
	for _, p := range w.cfg.Pools {
		if p.Type == t {
			return p, true
		}
	}
	return Pool{}, false
}

// claimSpecs makes this worker's pools the sources of its tools in the
// registry (registry.Claim), before any consumer is extended or spec
// published: a tool another pool defines differently is refused with an
// error naming both. Shadow workers claim nothing: they publish versions
// only and never change what a name means. Called under w.mu; a tool
// claimed once on a subject is not claimed again.
func (w *Worker) claimSpecs(ctx context.Context, stamped []*toolwirev1.ToolSpec) error {
	if w.cfg.Shadow {
		return nil
	}
	if w.claimed == nil {
		w.claimed = map[string]string{}
	}
	for _, s := range stamped {
		p, _ := w.poolOf(s.Executor) // checkSpecs found it
		src := registry.Source{Pool: p.Name, Subject: w.bus.Subjects.ToolSubject(s.Executor, s.Provider, s.Name), Worker: w.cfg.Name}
		if w.claimed[s.Name] == src.Subject {
			continue
		}
		if err := w.writerOf(p).Claim(ctx, s); err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		w.claimed[s.Name] = src.Subject
	}
	return nil
}

// publishSpecs has the registry written with the stamped specs, pool by
// pool (registry.PoolWriter.Publish): a live worker's become the current
// versions, a shadow worker's versions only.
func (w *Worker) publishSpecs(ctx context.Context, stamped []*toolwirev1.ToolSpec) error {
	for _, p := range w.cfg.Pools {
		var mine []*toolwirev1.ToolSpec
		for _, s := range stamped {
			if s.Executor == p.Type {
				mine = append(mine, s)
			}
		}
		if err := w.writerOf(p).Publish(ctx, mine, w.cfg.Shadow); err != nil {
			return fmt.Errorf("worker: publish specs: %w", err)
		}
	}
	return nil
}

// writerOf is what announces pool p's tools to the registry.
func (w *Worker) writerOf(p Pool) registry.PoolWriter {
	return registry.PoolWriter{Writer: w.cfg.Registry, Pool: p.Name, Type: p.Type, Worker: w.cfg.Name, Signer: w.bus.Signer.Public()}
}

// claimAgain runs start (Start's or Ensure's work, which takes w.mu) and,
// when it fails on a claim refused because the tool's holder has not
// been serving it (registry.ClaimError with Holder.MissingSince: its
// pool's consumer is gone) but not yet for registry.ClaimGrace, waits
// until that period has passed (plus a second and up to a second of
// jitter, for the dispatchers' clocks and for replicas claiming at once;
// never longer than the grace period and two seconds) and runs it once
// more: a pool taking over a retired pool's tools starts, rather than
// exiting. The wait is logged, holds no lock (the worker is not ready
// meanwhile) and ends with ctx. Any other error, or a second refusal, is
// returned.
func (w *Worker) claimAgain(ctx context.Context, start func(context.Context) error) error {
	err := start(ctx)
	var ce *registry.ClaimError
	if !errors.As(err, &ce) || ce.Holder.MissingSince.IsZero() {
		return err
	}
	jitter := time.Second + time.Duration(mrand.Int64N(int64(time.Second)))
	wait := min(max(time.Until(ce.Holder.MissingSince.Add(registry.ClaimGrace))+jitter, jitter), registry.ClaimGrace+2*time.Second)
	w.log.WarnContext(ctx, "tool held by a pool that does not serve it; claiming it again once its grace period ends",
		"tool", ce.Tool, "holder", ce.Holder.Pool, "missing_since", ce.Holder.MissingSince, "wait", wait)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("worker: waiting to claim %s again: %w (%w)", ce.Tool, ctx.Err(), err)
	case <-t.C:
	}
	return start(ctx)
}
