package capacity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/bus"
)

// AccountStore is the name of the reading of the JetStream account's
// storage, present when the account has a storage limit.
const AccountStore = "account"

// Reading is one store's state at one moment, from its stream's info.
type Reading struct {
	// Name is the store's short name (bus.Store.Name), or AccountStore.
	Name string
	// Stream is the JetStream stream that holds it ("(account)" for the
	// account).
	Stream string
	// Bytes and Messages are what the store holds now.
	Bytes, Messages uint64
	// MaxBytes and MaxMessages are its live limits (the stream's
	// configuration, which an operator may have changed since the layout
	// was opened); -1 = unbounded.
	MaxBytes, MaxMessages int64
	// Written is the stream's last sequence: every message it ever took,
	// including those removed since (0 for the account).
	Written uint64
	// MaxAge is how long the store keeps a message (its stream's live
	// configuration); 0 = no age limit, and for the account.
	MaxAge time.Duration
	// RefusesCalls says that a dispatcher refuses new calls as the store
	// fills, past its high-water share of MaxBytes (internal/poolview): a
	// store that refuses writes when full (bus.Store.DiscardNew) and that
	// calls write (bus.Store.Use: calls, idempotency), and the account.
	RefusesCalls bool
}

// IsAccount says that r is the account's reading, whose Messages are not
// counted (0, unknown).
func (r Reading) IsAccount() bool { return r.Name == AccountStore }

// Sample is the reading of every store of an installation at one moment.
type Sample struct {
	// At is when the reading started.
	At time.Time
	// Stores are the readings in layout order (bus.Config.Stores), the
	// account last; a store whose stream does not exist is left out.
	Stores []Reading
	// Calls is the calls stream's last sequence: the calls written so far
	// (new calls, and parked retries put back).
	Calls uint64
}

// Read reads the info of every stream and bucket of the installation c
// (bus.Config.Stores) and of the JetStream account: one STREAM.INFO
// request per store and one INFO request, which the operator role may
// make. A store whose stream does not exist is left out; when none
// exists Read returns bus.ErrNoInstallation. Any other failure ends the
// reading with that error. A failed read of the account's info is not
// an error (the account is simply left out).
func Read(ctx context.Context, js jetstream.JetStream, c bus.Config) (Sample, error) {
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return Sample{}, err
	}
	s := Sample{At: time.Now()}
	for _, st := range c.Stores() {
		stream, err := js.Stream(ctx, st.Stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			// The first failure ends the reading: a refused or unanswered
			// request (another installation's credentials) fails the same
			// way for every store.
			return Sample{}, fmt.Errorf("capacity: stream %s: %w", st.Stream, err)
		}
		info := stream.CachedInfo()
		s.Stores = append(s.Stores, Reading{Name: st.Name, Stream: st.Stream, Bytes: info.State.Bytes, Messages: info.State.Msgs,
			MaxBytes: unbounded(info.Config.MaxBytes), MaxMessages: unbounded(info.Config.MaxMsgs), Written: info.State.LastSeq,
			MaxAge: info.Config.MaxAge, RefusesCalls: st.DiscardNew && st.Use != bus.UsedByNoCall})
		if st.Name == "calls" {
			s.Calls = info.State.LastSeq
		}
	}
	if len(s.Stores) == 0 {
		return Sample{}, fmt.Errorf("capacity: %w: no stream of prefix %q (%s, ...)", bus.ErrNoInstallation, c.Prefix, c.CallsStream())
	}
	if ai, err := js.AccountInfo(ctx); err == nil {
		if r, ok := account(ai, c.Replicas); ok {
			s.Stores = append(s.Stores, r)
		}
	}
	return s, nil
}

// account is the reading of the account's storage, when it has a limit:
// its own, or on a tiered account (limits per replica count, none at the
// top level) the limit of the tier the installation's streams are in
// ("R1" for replicas 1, "R3" for 3).
func account(ai *jetstream.AccountInfo, replicas int) (Reading, bool) {
	r := Reading{Name: AccountStore, Stream: "(account)", MaxMessages: -1, RefusesCalls: true}
	if ai.Limits.MaxStore > 0 {
		r.Bytes, r.MaxBytes = ai.Store, ai.Limits.MaxStore
		return r, true
	}
	tier := fmt.Sprintf("R%d", replicas)
	if t, ok := ai.Tiers[tier]; ok && t.Limits.MaxStore > 0 {
		r.Stream = "(account, tier " + tier + ")"
		r.Bytes, r.MaxBytes = t.Store, t.Limits.MaxStore
		return r, true
	}
	return Reading{}, false
}

// unbounded maps JetStream's "no limit" (0 or -1) to -1.
func unbounded(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}
