package bus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ScanInactive is the inactivity threshold of a Scan's server consumer:
// how long one outlives a process that died mid-scan. A live scan never
// comes near it, since each fetch makes a new consumer.
const ScanInactive = time.Minute

// ScanSlots is how many scans may read one stream at once under the
// operator role: a scan's server consumer takes one of ScanSlots fixed
// names (ScanConsumer), and those are the only consumers the operator
// role may create, read from or delete (RolePermissions). A name never
// collides with a pool's consumer (PoolConsumer), so an operator
// credential cannot change or delete a pool's consumer.
const ScanSlots = 8

// scanRequest bounds creating or deleting one consumer of a scan, also
// after the scan's context ended.
const scanRequest = 10 * time.Second

// scanNonceKey is the metadata key that makes each scan's consumer
// configuration its own: creating a consumer whose name is taken by
// another scan's then fails (the name's slot is busy) instead of
// returning the other scan's consumer.
const scanNonceKey = "toolwire_scan"

// ScanConsumer is the name of scan slot i (0 ≤ i < ScanSlots).
func ScanConsumer(slot int) string { return "scan_" + strconv.Itoa(slot) }

// Scan reads a stream once, in order (an audit, a dead-letter listing),
// and leaves no consumer behind. Like an ordered consumer, each fetch
// reads from a new server consumer that starts after the last message the
// previous fetches returned; unlike the library's ordered consumer, whose
// names are a random prefix and a serial, every one is named after a scan
// slot (ScanConsumer), so the operator role needs no wildcard consumer
// name. A slot another scan holds is skipped; when all ScanSlots are
// taken, a random name is tried (allowed to the dispatchers, refused to
// the operator role). A scan given a NamePrefix (a role that may name
// its consumers freely: the dispatchers) takes no slot: its consumers are
// named NamePrefix and a random suffix, so it never crowds an operator
// out. Each replaced consumer is deleted before the next is made, and the
// last one on Close, but only while it is still the scan's own (see
// delete). These are no pool's consumers (Config.IsPoolConsumer): they
// never block a pool, even while they last. A Scan is not safe for
// concurrent use.
type Scan struct {
	stream jetstream.Stream
	cfg    jetstream.OrderedConsumerConfig
	nonce  string
	// slot is the slot tried first; name the server consumer the last
	// fetch read from ("" before the first and after Close).
	slot int
	name string
	cons jetstream.Consumer
	// made is when the current consumer was made: its inactivity
	// threshold runs from a later instant (its creation, its last fetch).
	made time.Time
	// next is the stream sequence the next consumer starts at; 0 = cfg's
	// start, before any message was returned.
	next uint64
}

// NewScan returns a Scan of stream with cfg (its MaxResetAttempts is not
// used); an InactiveThreshold of 0 is ScanInactive. A NamePrefix names
// every consumer of the scan NamePrefix and a random suffix instead of a
// slot, for a role that may create any consumer name (the dispatchers;
// the operator role may not). It makes no consumer until the first fetch.
func NewScan(_ context.Context, stream jetstream.Stream, cfg jetstream.OrderedConsumerConfig) (*Scan, error) {
	if cfg.InactiveThreshold == 0 {
		cfg.InactiveThreshold = ScanInactive
	}
	nonce, err := randomHex()
	if err != nil {
		return nil, err
	}
	return &Scan{stream: stream, cfg: cfg, nonce: nonce, slot: mrand.IntN(ScanSlots)}, nil
}

// Fetch is a pull consumer's Fetch, from where the scan stands.
func (s *Scan) Fetch(batch int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	if err := s.renew(); err != nil {
		return nil, err
	}
	b, err := s.cons.Fetch(batch, opts...)
	if err != nil {
		return nil, err
	}
	return s.drain(b), nil
}

// FetchNoWait is a pull consumer's FetchNoWait, from where the scan
// stands.
func (s *Scan) FetchNoWait(batch int) (jetstream.MessageBatch, error) {
	if err := s.renew(); err != nil {
		return nil, err
	}
	b, err := s.cons.FetchNoWait(batch)
	if err != nil {
		return nil, err
	}
	return s.drain(b), nil
}

// Info is the info of the server consumer the last fetch read from.
func (s *Scan) Info(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	if s.cons == nil || s.name == "" {
		return nil, errors.New("bus: scan: Info before a fetch")
	}
	return s.cons.Info(ctx)
}

// Close deletes the scan's current server consumer, also when the scan's
// context has ended. Idempotent. Its error is for a log line only: a
// consumer it could not delete goes after the inactivity threshold.
func (s *Scan) Close() error {
	name := s.name
	s.name = ""
	if name == "" {
		return nil
	}
	return s.delete(name)
}

// renew replaces the scan's server consumer with one that starts after
// the last message returned.
func (s *Scan) renew() error {
	if s.name != "" {
		_ = s.delete(s.name) // a consumer left behind goes when inactive
		s.name = ""
	}
	cfg := s.consumerConfig()
	ctx, cancel := context.WithTimeout(context.Background(), scanRequest)
	defer cancel()
	s.made = time.Now()
	if s.cfg.NamePrefix != "" {
		cfg.Name = s.cfg.NamePrefix + s.nonce
		cons, err := s.stream.CreateConsumer(ctx, cfg)
		if err != nil {
			return fmt.Errorf("bus: scan consumer %s: %w", cfg.Name, err)
		}
		s.name, s.cons = cfg.Name, cons
		return nil
	}
	for i := range ScanSlots {
		slot := (s.slot + i) % ScanSlots
		cfg.Name = ScanConsumer(slot)
		cons, err := s.stream.CreateConsumer(ctx, cfg)
		if errors.Is(err, jetstream.ErrConsumerExists) {
			continue // another scan's
		}
		if err != nil {
			return fmt.Errorf("bus: scan consumer %s: %w", cfg.Name, err)
		}
		s.slot, s.name, s.cons = slot, cfg.Name, cons
		return nil
	}
	cfg.Name = "scan_" + s.nonce
	cons, err := s.stream.CreateConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bus: scan: all %d scan consumers are in use (one a process left goes after %s), and %s: %w",
			ScanSlots, s.cfg.InactiveThreshold, cfg.Name, err)
	}
	s.name, s.cons = cfg.Name, cons
	return nil
}

// consumerConfig is the configuration of the scan's next server consumer
// (its Name set by renew).
func (s *Scan) consumerConfig() jetstream.ConsumerConfig {
	c := s.cfg
	cfg := jetstream.ConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       s.next,
		AckPolicy:         jetstream.AckNonePolicy,
		ReplayPolicy:      c.ReplayPolicy,
		InactiveThreshold: c.InactiveThreshold,
		Replicas:          1,
		MemoryStorage:     true,
		HeadersOnly:       c.HeadersOnly,
		Metadata:          map[string]string{scanNonceKey: s.nonce},
	}
	for k, v := range c.Metadata {
		cfg.Metadata[k] = v
	}
	if len(c.FilterSubjects) == 1 {
		cfg.FilterSubject = c.FilterSubjects[0]
	} else {
		cfg.FilterSubjects = c.FilterSubjects
	}
	if s.next != 0 {
		return cfg
	}
	cfg.DeliverPolicy, cfg.OptStartSeq = c.DeliverPolicy, 0
	switch c.DeliverPolicy {
	case jetstream.DeliverByStartTimePolicy:
		cfg.OptStartTime = c.OptStartTime
	case jetstream.DeliverByStartSequencePolicy:
		cfg.OptStartSeq = max(c.OptStartSeq, 1)
	}
	return cfg
}

// drain reads a fetch to its end and returns its messages as a batch
// already complete, noting where the next fetch starts. The client holds
// a fetch's messages in memory either way.
func (s *Scan) drain(b jetstream.MessageBatch) jetstream.MessageBatch {
	var msgs []jetstream.Msg
	for m := range b.Messages() {
		msgs = append(msgs, m)
		if md, err := m.Metadata(); err == nil {
			s.next = md.Sequence.Stream + 1
		}
	}
	ch := make(chan jetstream.Msg, len(msgs))
	for _, m := range msgs {
		ch <- m
	}
	close(ch)
	return &drained{msgs: ch, err: b.Error()}
}

// drained is a fetch read to its end.
type drained struct {
	msgs chan jetstream.Msg
	err  error
}

func (d *drained) Messages() <-chan jetstream.Msg { return d.msgs }
func (d *drained) Error() error                   { return d.err }

// delete deletes the scan's consumer name if it is still the scan's own.
// Names are slots that scans share: a consumer that expired (its caller
// paused longer than the inactivity threshold, `toolctl audit | less`) or
// was deleted by hand may since have been made again by another scan,
// and deleting by name would delete that one. So a consumer is deleted
// only when its metadata carries this scan's nonce, and only while less
// than half its inactivity threshold has passed since it was made: after
// that it is left to expire, as it may do between the check and the
// delete. Not found or another scan's: already gone, no error.
//
// What remains: the consumer deleted by hand and its name taken by
// another scan in the milliseconds between the info and the delete, or a
// delete the server holds for more than half the threshold (30s; each
// request gives up after scanRequest, 10s).
func (s *Scan) delete(name string) error {
	if time.Since(s.made) >= s.cfg.InactiveThreshold/2 {
		return nil // may be expired, and the name another scan's
	}
	ctx, cancel := context.WithTimeout(context.Background(), scanRequest)
	defer cancel()
	cons, err := s.stream.Consumer(ctx, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil // the inactivity threshold, or a hand, came first
	}
	if err != nil {
		return fmt.Errorf("bus: scan consumer %s: %w", name, err)
	}
	if cons.CachedInfo().Config.Metadata[scanNonceKey] != s.nonce {
		return nil // another scan's, made after ours went
	}
	if err := s.stream.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("bus: delete scan consumer %s: %w", name, err)
	}
	return nil
}

// randomHex is 8 random bytes in hex.
func randomHex() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("bus: random: %w", err)
	}
	return hex.EncodeToString(b), nil
}
