package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/envelope"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// orphanBudget bounds the calls one sweep ends, so a flood of them (or a
// retired pool's whole history) is worked off over several sweeps.
const orphanBudget = 1000

// sweeper ends orphaned calls: calls on a subject that no pool consumer
// filters, which nobody would ever deliver. They arrive by a raw publish
// (an unknown executor type, a tool no pool serves), or stay behind when a
// pool's consumer is deleted; admission itself only queues calls of tools
// a worker registered after creating its consumer. Each sweep lists the
// calls stream's subjects, keeps those no pool consumer's filter matches,
// and ends every call on them older than OrphanGrace: a dead letter and,
// when the call can be answered safely, a NOT_FOUND answer. Every replica
// sweeps; the dead letter's message id (orphan-<stream sequence>) and the
// result's ExpectLastSequencePerSubject(0) keep that harmless.
type sweeper struct {
	d *Dispatcher
	// swept is the last stream sequence handled per orphaned subject (this
	// process's memory: after a restart, answered calls are recognised by
	// their result, unanswerable ones are dead-lettered again).
	swept map[string]uint64
}

// startSweeper starts the orphan sweeper unless Config.OrphanSweep is -1
// (then it returns nil); the stopper it returns ends it.
func (d *Dispatcher) startSweeper() stopper {
	if d.cfg.OrphanSweep < 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s := &sweeper{d: d, swept: map[string]uint64{}}
	go func() {
		defer close(done)
		s.run(ctx)
	}()
	return func() <-chan struct{} {
		cancel()
		return done
	}
}

func (s *sweeper) run(ctx context.Context) {
	every := s.d.cfg.OrphanSweep
	// Replicas started together do not sweep in step.
	t := time.NewTimer(every/2 + rand.N(every/2+1))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, max(every, 30*time.Second))
		if err := s.sweep(sctx); err != nil && ctx.Err() == nil {
			s.d.log.Warn("orphaned calls sweep failed; trying again at the next", "err", err)
		}
		cancel()
		t.Reset(every)
	}
}

// sweep ends the orphaned calls older than the grace period, at most
// orphanBudget of them.
func (s *sweeper) sweep(ctx context.Context) error {
	cov, err := s.coverage(ctx)
	if err != nil {
		return err
	}
	info, err := s.d.bus.Calls.Info(ctx, jetstream.WithSubjectFilter(s.d.subj.AllCalls()))
	if err != nil {
		return fmt.Errorf("list call subjects: %w", err)
	}
	for subject := range s.swept {
		if info.State.Subjects[subject] == 0 {
			delete(s.swept, subject) // aged out
		}
	}
	var orphaned []string
	for subject := range info.State.Subjects {
		if cov.covers(subject) {
			delete(s.swept, subject)
			continue
		}
		orphaned = append(orphaned, subject)
	}
	slices.Sort(orphaned)
	budget := orphanBudget
	cutoff := time.Now().Add(-s.d.cfg.OrphanGrace)
	for _, subject := range orphaned {
		n, err := s.sweepSubject(ctx, subject, cutoff, budget)
		if n > 0 {
			s.d.log.Warn("ended calls on a subject no pool consumes", "subject", subject, "calls", n)
		}
		if err != nil {
			return err
		}
		if budget -= n; budget <= 0 {
			return nil
		}
	}
	return nil
}

// sweepSubject ends the calls of subject stored before cutoff that this
// process has not handled yet, at most budget; it returns how many.
func (s *sweeper) sweepSubject(ctx context.Context, subject string, cutoff time.Time, budget int) (int, error) {
	n := 0
	for n < budget {
		m, err := s.d.bus.Calls.GetMsg(ctx, s.swept[subject]+1, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("read %s: %w", subject, err)
		}
		if m.Time.After(cutoff) {
			return n, nil // not orphaned yet: a pool may still appear
		}
		if err := s.end(ctx, m); err != nil {
			return n, err
		}
		s.swept[subject] = m.Sequence
		n++
	}
	return n, nil
}

// end dead-letters one orphaned call and answers it NOT_FOUND, unless it
// already has a result. A call that cannot be answered safely (not a
// call, a tenant that is no valid name, or a subject naming another
// tenant than the payload: the answer would land in a tenant's results on
// a stranger's word) is dead-lettered raw under no tenant.
func (s *sweeper) end(ctx context.Context, m *jetstream.RawStreamMsg) error {
	d := s.d
	te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND,
		fmt.Sprintf("no worker pool consumes the subject %s: the call was never delivered", m.Subject))
	te.Suggestion = "call tools through the dispatcher; check that a worker pool serves the tool"
	dl := &toolwirev1.DeadLetter{Subject: m.Subject, Reason: "no pool consumes the subject", LastError: te,
		Time: timestamppb.Now(), Worker: "sweeper:" + d.cfg.Name}
	msgID := fmt.Sprintf("orphan-%d", m.Sequence)
	call := &toolwirev1.ToolCall{}
	if proto.Unmarshal(m.Data, call) != nil || call.CallId == "" || !answerable(m.Subject, call) {
		dl.Raw = m.Data
		return d.deadLetter(ctx, d.subj.DLQ(toolwirev1.ExecutorType_EXECUTOR_TYPE_UNSPECIFIED, "_unknown", "_unknown", "_unknown"), dl, msgID)
	}
	tenant := call.Caller.Tenant
	result := d.subj.Result(tenant, call.Dispatcher, call.CallId)
	if _, err := d.bus.Results.GetLastMsgForSubject(ctx, result); err == nil {
		return nil // answered already
	} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("look up result of %s: %w", call.CallId, err)
	}
	dl.Call = call
	if err := d.deadLetter(ctx, d.subj.DLQ(call.Executor, tenant, call.Provider, call.Tool), dl, msgID); err != nil {
		return err
	}
	resp := envelope.DeadLettered(call, te, 0, time.Now())
	data, err := proto.Marshal(resp)
	if err != nil {
		return err
	}
	if _, err := d.bus.JS.Publish(ctx, result, data, jetstream.WithExpectLastSequencePerSubject(0)); err != nil && !bus.IsWrongLastSequence(err) {
		return fmt.Errorf("answer orphaned call %s: %w", call.CallId, err)
	}
	return nil
}

// answerable reports whether call's tenant is a valid name and is exactly
// the tenant token of its subject, <prefix>.call.<type>.<tenant>.….
func answerable(subject string, call *toolwirev1.ToolCall) bool {
	tenant := call.GetCaller().GetTenant()
	toks := strings.Split(subject, ".")
	return len(toks) == 6 && toks[3] == tenant && bus.ValidTenant(tenant)
}

// deadLetter publishes dl on subject under msgID (idempotent within the
// DLQ stream's duplicate window).
func (d *Dispatcher) deadLetter(ctx context.Context, subject string, dl *toolwirev1.DeadLetter, msgID string) error {
	data, err := proto.Marshal(dl)
	if err != nil {
		return err
	}
	if _, err := d.bus.JS.Publish(ctx, subject, data, jetstream.WithMsgID(msgID)); err != nil {
		return fmt.Errorf("dead letter %s: %w", msgID, err)
	}
	return nil
}

// coverage is the set of filters of the pool consumers of the calls
// stream.
type coverage struct {
	prefix string
	exact  map[string]bool // every filter, as written
	other  []string        // filters of shapes covers does not look up
}

// coverage lists the pool consumers' filters.
func (s *sweeper) coverage(ctx context.Context) (coverage, error) { return listCoverage(ctx, s.d.bus) }

// listCoverage lists the filters of b's pool consumers.
func listCoverage(ctx context.Context, b *bus.Bus) (coverage, error) {
	c := coverage{prefix: b.Config.Prefix, exact: map[string]bool{}}
	lister := b.Calls.ListConsumers(ctx)
	for ci := range lister.Info() {
		if !b.Config.IsPoolConsumer(ci) {
			continue // audits, watchers: they deliver to no worker
		}
		for _, f := range bus.ConsumerFilters(ci.Config) {
			c.exact[f] = true
			if !c.lookedUp(f) {
				c.other = append(c.other, f)
			}
		}
	}
	if err := lister.Err(); err != nil {
		return c, fmt.Errorf("list pool consumers: %w", err)
	}
	return c, nil
}

// lookedUp reports whether covers finds filter f by lookup: one tool's
// calls (<prefix>.call.<type>.*.<provider>.<tool>), every call of a type
// (<prefix>.call.<type>.>) or a literal subject.
func (c coverage) lookedUp(f string) bool {
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

// covers reports whether some pool consumer's filter matches subject.
func (c coverage) covers(subject string) bool {
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
