package policystore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/policystore"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A policy change is in force on every dispatcher replica within the
// bound the design sets (one second), measured from Apply returning to
// each replica's holder publishing it, over 20 applies on 3 replicas,
// each with its own NATS connection and holder; each replica's next call
// is then decided by the new document. The measured figure is logged
// (doc.go quotes it); the assertion is generous for busy CI machines.
func TestThreeReplicasSeePolicyChange(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	type replica struct {
		h *policystore.Holder
		d *dispatch.Dispatcher
	}
	var replicas []replica
	for i := range 3 {
		b := s.Env.Open(t, fmt.Sprintf("replica-%d", i))
		h := s.StartPolicies(t, b)
		d, err := dispatch.New(b, s.Registry, dispatch.Config{Name: fmt.Sprintf("replica-%d", i), Policies: h, MaxQueueWait: time.Minute})
		require.NoError(t, err)
		require.NoError(t, d.Start(t.Context()))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			require.NoError(t, d.Stop(ctx))
		})
		replicas = append(replicas, replica{h, d})
	}
	store := policystore.NewStore(s.Env.Bus, nil)
	scope := tenant(t, "acme")
	id := identity.Identity{Tenant: "acme", Agent: "bot", Scopes: []string{"*"}}
	docs := []string{
		"tenant:\n  rules:\n    - {id: no-echo, effect: deny, tools: [echo], reason: echo is off}\n",
		"tenant:\n  rules:\n    - {id: echo-ok, effect: allow, tools: [echo]}\n",
	}

	const applies = 20
	var lat, fromStart []time.Duration
	for i := range applies {
		start := time.Now()
		a, err := store.Apply(t.Context(), scope, []byte(docs[i%2]), policystore.ApplyOptions{AppliedBy: "test"})
		require.NoError(t, err)
		applied := time.Now()
		require.True(t, a.Changed)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, r := range replicas {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				defer cancel()
				err := r.h.Wait(ctx, scope, a.Version.Version, a.Revision)
				seen := time.Now()
				mu.Lock()
				defer mu.Unlock()
				require.NoError(t, err, "replica %s did not see %s within 5s", r.d.Name(), a.Version.Version)
				lat = append(lat, seen.Sub(applied))
				fromStart = append(fromStart, seen.Sub(start))
			})
		}
		wg.Wait()
		for _, r := range replicas {
			sub, err := r.d.Submit(t.Context(), id, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`})
			require.NoError(t, err)
			if i%2 == 0 {
				require.NotNil(t, sub.Rejected, "replica %s: apply %d", r.d.Name(), i)
				require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, sub.Rejected.GetError().GetType())
				require.Contains(t, sub.Rejected.GetError().GetMessage(), "echo is off")
			} else {
				require.Nil(t, sub.Rejected, "replica %s: apply %d: %v", r.d.Name(), i, sub.Rejected.GetError())
			}
		}
	}
	worst := report(t, "from Apply returning", lat)
	report(t, "from Apply starting (its write included)", fromStart)
	require.Less(t, worst, 5*time.Second, "the design asks for one second; 5s leaves room for a busy CI machine")
}

// report logs the p50, p99 and max of lat and returns the max.
func report(t *testing.T, what string, lat []time.Duration) time.Duration {
	t.Helper()
	slices.Sort(lat)
	p50, p99, worst := lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	t.Logf("policy change in force on 3 replicas, %s (%d observations): p50 %s, p99 %s, max %s",
		what, len(lat), p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), worst.Round(10*time.Microsecond))
	return worst
}

// A change is applied when every dispatcher enforces it: WaitFleet
// returns once each replica that answered reports the change in force —
// after it, every replica decides by the new document without waiting —
// over 100 changes while another tenant applies slow documents, and it
// names a replica that cannot load a change in time (issue 28, finding 4:
// changes were 36 s to 2 min late behind a slow document). The figure
// is logged (docs/policy.md quotes it).
func TestWaitFleetReturnsWhenEveryReplicaEnforces(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	var holders []*policystore.Holder
	for i := range 3 {
		holders = append(holders, s.StartPolicies(t, s.Env.Open(t, fmt.Sprintf("replica-%d", i))))
	}
	store := policystore.NewStore(s.Env.Bus, nil)
	policystore.SetPruneGrace(store, 0) // 200 applies in well under the quota's minute
	scope, slowScope := tenant(t, "acme"), tenant(t, "slow")
	// Another tenant keeps applying documents as slow to compile as the
	// rules allow (conditions nested 30 deep) meanwhile.
	slowDoc := func(i int) []byte {
		var b strings.Builder
		b.WriteString("tenant:\n  rules:\n")
		deep := "size(" + strings.Repeat("{'a':", 30) + "1" + strings.Repeat("}", 30) + ") > 0"
		for r := range 5 {
			fmt.Fprintf(&b, "    - {id: slow%d-%d, effect: deny, tools: [echo], when: \"%s\"}\n", i, r, deep)
		}
		return []byte(b.String())
	}
	var lat []time.Duration
	for i := range 100 {
		_, err := store.Apply(t.Context(), slowScope, slowDoc(i), policystore.ApplyOptions{AppliedBy: "test"})
		require.NoError(t, err)
		start := time.Now()
		a, err := store.Apply(t.Context(), scope, []byte(fmt.Sprintf("# change %d\ntenant:\n  rules:\n    - {id: r%d, effect: deny, tools: [echo]}\n", i, i)),
			policystore.ApplyOptions{AppliedBy: "test"})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		st, err := holders[0].WaitFleet(ctx, scope, a.Version.Version, a.Revision)
		cancel()
		require.NoError(t, err)
		lat = append(lat, time.Since(start))
		require.Empty(t, st.NotInForce)
		for _, h := range holders {
			require.Contains(t, st.InForce, h.Replica())
			require.Equal(t, a.Version.Version, h.For("acme").Version(), "in force on %s when WaitFleet returned", h.Replica())
		}
	}
	worst := report(t, "apply to WaitFleet returning, another tenant applying slow documents meanwhile", lat)
	require.Less(t, worst, 5*time.Second, "the issue asks for one second; 5 s leaves room for a busy CI machine")

	// A replica that cannot compile the next document in time is named.
	stuck := policystore.NewHolder(s.Env.Open(t, "stuck"), nil)
	release := make(chan struct{})
	policystore.SetParse(stuck, func(b []byte) (*policy.Policy, error) {
		if strings.Contains(string(b), "stuck here") {
			<-release
		}
		return policy.Parse(b)
	})
	require.NoError(t, stuck.Start(t.Context()))
	t.Cleanup(func() { close(release); _ = stuck.Stop(context.Background()) })
	// The asker knows the stuck replica is live (its presence arrived):
	// on a loaded machine its first answer may come after FleetDiscovery,
	// and a replica neither live nor answering is not counted (by design).
	require.Eventually(t, func() bool {
		return slices.Contains(policystore.LivePeers(holders[0]), stuck.Replica())
	}, 30*time.Second, 10*time.Millisecond)
	a, err := store.Apply(t.Context(), scope, []byte("# stuck here\ntenant:\n  default: deny\n"), policystore.ApplyOptions{AppliedBy: "test"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	st, err := holders[0].WaitFleet(ctx, scope, a.Version.Version, a.Revision)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, "not in force yet", st.NotInForce[stuck.Replica()])
	require.Contains(t, st.InForce, holders[1].Replica())
}

// A replica whose wait for a change ends before the change is in force
// there (the asker's wait passed) sends no final answer: its own
// deadline is no problem of the change, and as a final answer it ended
// an asker's WaitFleet as settled, with no error, when its deadline and
// that answer were ready together (CI: TestWaitFleetReturnsWhenEveryReplicaEnforces).
func TestAnExpiredFleetWaitIsNoFinalAnswer(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	stuck := policystore.NewHolder(s.Env.Open(t, "stuck"), nil)
	release := make(chan struct{})
	policystore.SetParse(stuck, func(b []byte) (*policy.Policy, error) {
		if strings.Contains(string(b), "stuck here") {
			<-release
		}
		return policy.Parse(b)
	})
	require.NoError(t, stuck.Start(t.Context()))
	t.Cleanup(func() { close(release); _ = stuck.Stop(context.Background()) })
	scope := tenant(t, "acme")
	a, err := policystore.NewStore(s.Env.Bus, nil).Apply(t.Context(), scope, []byte("# stuck here\ntenant:\n  default: deny\n"), policystore.ApplyOptions{AppliedBy: "test"})
	require.NoError(t, err)

	nc := s.Env.Bus.NC
	inbox := nc.NewRespInbox()
	answers := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe(inbox, answers)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, nc.PublishRequest(bus.PolicyInForceSubject(s.Env.Bus.Config), inbox, policystore.FleetAsk(scope, a.Version.Version, a.Revision, 50)))
	// The stack's own replica answers too (in force or not): only the
	// stuck replica's answers are looked at.
	var stuckSaid []policystore.FleetAnswer
	wait := time.After(30 * time.Second)
	for len(stuckSaid) == 0 {
		select {
		case m := <-answers:
			var ans policystore.FleetAnswer
			require.NoError(t, json.Unmarshal(m.Data, &ans))
			if ans.Replica == stuck.Replica() {
				stuckSaid = append(stuckSaid, ans)
			}
		case <-wait:
			t.Fatal("the stuck replica never answered")
		}
	}
	require.False(t, stuckSaid[0].InForce)
	require.Empty(t, stuckSaid[0].Problem, "not in force yet: no problem")
	absence := time.After(2 * time.Second) // a bound on an absence: 40 times the asker's wait
	for {
		select {
		case m := <-answers: // before the fix: "context deadline exceeded", final, ~50 ms later
			var ans policystore.FleetAnswer
			require.NoError(t, json.Unmarshal(m.Data, &ans))
			require.NotEqual(t, stuck.Replica(), ans.Replica, "a second answer after the asker's wait: %s", m.Data)
		case <-absence:
			return
		}
	}
}
