package policystore

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// A change of policy is applied when every live dispatcher enforces it,
// not when the bucket stores it. The dispatcher that applied it asks the
// fleet (PolicyInForceSubject): every Holder answers at once whether the
// scope's record of that revision is in force there, and, when it is not
// yet, again once it is (or could not be loaded, or was superseded).
// Live are the dispatchers whose Holder said so on PolicyReplicasSubject
// in the last PeerExpiry (each says it at start and every PresenceEvery)
// and those that answer within FleetDiscovery. WaitFleet returns when
// each of them reports the change in force (or a final problem), or when
// its context ends, naming those that did not, "did not answer" for a
// live one that stayed silent (stopped less than PeerExpiry ago, or cut
// off).

// FleetDiscovery is how long WaitFleet collects first answers: a
// dispatcher that does not answer within it is not counted (it is down,
// or cut off: it takes the change from its watch when it is back).
const FleetDiscovery = 250 * time.Millisecond

// PresenceEvery is how often a Holder says it is alive; PeerExpiry how
// long one that said so counts as live.
const (
	PresenceEvery = 20 * time.Second
	PeerExpiry    = 3 * PresenceEvery
)

// notePeer records a Holder that said it is alive.
func (h *Holder) notePeer(m *nats.Msg) {
	name := string(m.Data)
	if name == "" || len(name) > 256 {
		return
	}
	h.peersMu.Lock()
	defer h.peersMu.Unlock()
	if len(h.peers) >= maxPeers {
		for p, at := range h.peers {
			if time.Since(at) > PeerExpiry {
				delete(h.peers, p)
			}
		}
		if len(h.peers) >= maxPeers {
			return
		}
	}
	h.peers[name] = time.Now()
}

// maxPeers bounds the Holders a Holder remembers.
const maxPeers = 1024

// livePeers returns the Holders that said they are alive within
// PeerExpiry.
func (h *Holder) livePeers() []string {
	h.peersMu.Lock()
	defer h.peersMu.Unlock()
	var out []string
	for p, at := range h.peers {
		if time.Since(at) <= PeerExpiry {
			out = append(out, p)
		}
	}
	return out
}

// sayAlive tells the fleet this Holder is alive (a hint: core NATS).
func (h *Holder) sayAlive() { _ = h.nc.Publish(h.replicas, []byte(h.replica)) }

// maxFleetWaits bounds the answers a Holder keeps waiting to send (one
// per ask whose change is not in force yet); asks beyond it get the first
// answer only.
const maxFleetWaits = 64

// fleetAsk is a request on PolicyInForceSubject.
type fleetAsk struct {
	Scope    string `json:"scope"`
	Version  string `json:"version"` // "" = a removal
	Revision uint64 `json:"revision"`
	// WaitMS is how long the asker waits for the final answer
	// (at most maxAnswerWait is kept).
	WaitMS int64 `json:"wait_ms,omitempty"`
}

// maxAnswerWait bounds how long a Holder keeps an answer it owes.
const maxAnswerWait = 30 * time.Second

// FleetAnswer is one dispatcher's answer: whether the change is in force
// there, and why not when it is final.
type FleetAnswer struct {
	Replica string `json:"replica"`
	InForce bool   `json:"in_force"`
	// Problem is set on a final answer that is not in force (the
	// document could not be loaded, a later change replaced it).
	Problem string `json:"problem,omitempty"`
	// answered is false for a live replica not heard from yet.
	answered bool
}

// FleetState is what WaitFleet saw.
type FleetState struct {
	// InForce names the dispatchers that enforce the change.
	InForce []string
	// NotInForce names those that answered and did not (yet), with why.
	NotInForce map[string]string
}

// answerAsk answers a fleet ask now, and once more when the change is in
// force here (in a goroutine of h.fleet, at most maxFleetWaits).
func (h *Holder) answerAsk(m *nats.Msg) {
	var a fleetAsk
	if m.Reply == "" || len(m.Data) > 1024 || json.Unmarshal(m.Data, &a) != nil {
		return
	}
	scope, ok := scopeOfToken(a.Scope)
	if !ok {
		return
	}
	now, cancel := context.WithCancel(context.Background())
	cancel()
	err := h.Wait(now, scope, a.Version, a.Revision)
	h.reply(m, err, false)
	if !errors.Is(err, context.Canceled) {
		return // final already
	}
	wait := min(time.Duration(max(a.WaitMS, 0))*time.Millisecond, maxAnswerWait)
	if wait <= 0 {
		return
	}
	select {
	case h.fleetSlots <- struct{}{}:
	default:
		return
	}
	h.fleetMu.Lock()
	defer h.fleetMu.Unlock()
	if h.fleetClosed {
		<-h.fleetSlots
		return // stopping: h.fleet is being waited for
	}
	h.fleet.Go(func() {
		defer func() { <-h.fleetSlots }()
		ctx, cancel := context.WithTimeout(h.fleetCtx, wait)
		defer cancel()
		err := h.Wait(ctx, scope, a.Version, a.Revision)
		if err != nil && ctx.Err() != nil {
			// The asker's wait (or this Holder) ended first: that is no
			// final problem of the change, and said as one it would end
			// an asker's WaitFleet as settled when its own deadline and
			// this answer are ready together. The asker names it.
			return
		}
		h.reply(m, err, true)
	})
}

// closeFleet stops taking asks that need a later answer and waits for the
// answers still owed (they end with fleetCtx).
func (h *Holder) closeFleet() {
	h.fleetMu.Lock()
	h.fleetClosed = true
	h.fleetMu.Unlock()
	h.fleet.Wait()
}

// reply sends this replica's answer to m: in force (err nil), pending
// (a wait that ended first; not final), or final with the problem.
func (h *Holder) reply(m *nats.Msg, err error, final bool) {
	ans := FleetAnswer{Replica: h.replica, InForce: err == nil}
	if err != nil && (final || !errors.Is(err, context.Canceled)) {
		ans.Problem = err.Error()
	}
	if b, err := json.Marshal(ans); err == nil {
		_ = m.Respond(b)
	}
}

// WaitFleet asks every dispatcher whether scope's change of revision
// (version "" for a removal) is in force, and waits until each that
// answered within FleetDiscovery reports it (or a final problem), or ctx
// ends.
func (h *Holder) WaitFleet(ctx context.Context, scope Scope, version string, revision uint64) (FleetState, error) {
	inbox := h.nc.NewRespInbox()
	answers := make(chan *nats.Msg, 256)
	sub, err := h.nc.ChanSubscribe(inbox, answers)
	if err != nil {
		return FleetState{}, fmt.Errorf("policystore: ask the fleet: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	wait := maxAnswerWait
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl)
	}
	body, _ := json.Marshal(fleetAsk{Scope: scope.token(), Version: version, Revision: revision, WaitMS: wait.Milliseconds()})
	if err := h.nc.PublishRequest(h.inforce, inbox, body); err != nil {
		return FleetState{}, fmt.Errorf("policystore: ask the fleet: %w", err)
	}
	seen := map[string]FleetAnswer{}
	for _, p := range h.livePeers() {
		seen[p] = FleetAnswer{Replica: p, Problem: ""} // expected: not yet answered
	}
	discovered := time.NewTimer(FleetDiscovery)
	defer discovered.Stop()
	done := false
	for {
		select {
		case m := <-answers:
			var a FleetAnswer
			if json.Unmarshal(m.Data, &a) != nil || a.Replica == "" {
				continue
			}
			a.answered = true
			if prev, ok := seen[a.Replica]; !ok || !prev.InForce && prev.Problem == "" {
				seen[a.Replica] = a
			}
		case <-discovered.C:
			done = true
		case <-ctx.Done():
			for p, a := range seen {
				if !a.answered && !a.InForce {
					a.Problem = "did not answer"
					seen[p] = a
				}
			}
			return fleetState(seen), fmt.Errorf("policystore: wait for the fleet: %w", ctx.Err())
		}
		if done && settled(seen) {
			return fleetState(seen), nil
		}
	}
}

// settled reports whether every answer seen is final: in force, or a
// problem.
func settled(seen map[string]FleetAnswer) bool {
	for _, a := range seen {
		if !a.InForce && a.Problem == "" {
			return false
		}
	}
	return true
}

func fleetState(seen map[string]FleetAnswer) FleetState {
	st := FleetState{NotInForce: map[string]string{}}
	for _, r := range slices.Sorted(maps.Keys(seen)) {
		a := seen[r]
		if a.InForce {
			st.InForce = append(st.InForce, r)
			continue
		}
		st.NotInForce[r] = a.Problem
		if a.Problem == "" {
			st.NotInForce[r] = "not in force yet"
		}
	}
	return st
}

// Replica is this Holder's name in its answers to the fleet's asks.
func (h *Holder) Replica() string { return h.replica }

// holders numbers the Holders of this process (tests run several).
var holders atomic.Int64

// replicaName names this Holder in its answers: the host (a pod's name in
// Kubernetes) and process, and which Holder of the process when there
// are several.
func replicaName() string {
	host, _ := os.Hostname()
	name := fmt.Sprintf("%s:%d", cmp.Or(host, "localhost"), os.Getpid())
	if n := holders.Add(1); n > 1 {
		name += fmt.Sprintf("/%d", n)
	}
	// Two containers can share a host name and pid (host networking, pid
	// 1): a random tail keeps their answers apart.
	return name + "-" + rand.Text()[:6]
}
