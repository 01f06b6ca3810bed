package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolwire/toolwire/internal/bus"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// Ops of an Announcement.
const (
	// OpClaim makes the pool the source of the spec's tool (Claim).
	OpClaim = "claim"
	// OpPublish claims the tool for the pool and writes the spec: its
	// version key, and the tool's current key when it changed.
	OpPublish = "publish"
	// OpVersions writes the spec's version key only (shadow pools): no
	// claim, the tool's current version unchanged.
	OpVersions = "versions"
	// OpApprove records Hash as the approved definition of the MCP tool
	// Tool unless one is recorded (trust on first use, ApproveFirst).
	OpApprove = "approve"
	// OpEnsure asks the dispatchers to create or update the pool's
	// consumer (bus.EnsurePool) over Consumer.Subjects, each the subject of
	// a tool the pool holds (its claim: the registry's source of the tool)
	// or, for a shadow pool, a replay subject of the pool's type. Workers
	// never create consumers: a create's filters travel in its body, which
	// NATS permissions cannot see.
	OpEnsure = "ensure"
)

// ConsumerRequest is the pool consumer an OpEnsure asks for: the
// settings of bus.PoolConfig a worker declares.
type ConsumerRequest struct {
	// Subjects are the tools' call subjects (bus.Subjects.ToolSubject) or,
	// with Shadow, their replay subjects (ShadowToolSubject); at least one.
	Subjects []string `json:"subjects"`
	// AckWait, MaxDeliver, MaxAckPending: bus.PoolConfig's (0 = its
	// defaults).
	AckWait       time.Duration `json:"ack_wait,omitempty"`
	MaxDeliver    int           `json:"max_deliver,omitempty"`
	MaxAckPending int           `json:"max_ack_pending,omitempty"`
	// Shadow: the pool serves replays only.
	Shadow bool `json:"shadow,omitempty"`
}

// Announcement is what a worker asks the dispatchers to write into the
// registry for one of its pools (bus.RegistrySubject; JSON on the wire).
// Workers never write the registry themselves: a Registrar checks each
// announcement and writes it.
type Announcement struct {
	// Op is one of OpClaim, OpPublish, OpVersions, OpApprove.
	Op string `json:"op"`
	// Pool is the announcing pool's name (bus.PoolConfig.Name), Type its
	// executor type: a pool registers only tools of its own type.
	Pool string                  `json:"pool"`
	Type toolwirev1.ExecutorType `json:"type"`
	// Worker is the announcing instance, for messages.
	Worker string `json:"worker,omitempty"`
	// Signer is the public key the worker signs its results and events
	// with (internal/signing): the Registrar enrols it for Pool when the
	// dispatchers' Trust allows it, and refuses the announcement when not.
	Signer string `json:"signer,omitempty"`
	// Spec is the binary ToolSpec (claim, publish, versions). Its version,
	// if set, must be the content's (Version): the Registrar recomputes it.
	Spec []byte `json:"spec,omitempty"`
	// Tool and Hash are the MCP tool and definition hash of OpApprove.
	Tool string `json:"tool,omitempty"`
	Hash string `json:"hash,omitempty"`
	// Consumer is the consumer of OpEnsure.
	Consumer *ConsumerRequest `json:"consumer,omitempty"`
}

// Announced is a Registrar's answer to an accepted Announcement.
type Announced struct {
	// Version is the spec's version as the Registrar computed it.
	Version string `json:"version,omitempty"`
	// Approved is the approved definition hash (OpApprove).
	Approved string `json:"approved,omitempty"`
	// Consumer is the name of the pool's consumer (OpEnsure), as made.
	Consumer string `json:"consumer,omitempty"`
}

// Writer writes the registry for a worker: a *Registrar in the
// dispatcher's process (its in-process workers), a *Remote elsewhere (a
// request to the dispatchers). Announce returns a *ClaimError (ErrClaimed)
// or a *RefusedError (ErrRefused) for an announcement refused, other
// errors when it could not be asked.
type Writer interface {
	Announce(ctx context.Context, a Announcement) (Announced, error)
}

// ErrRefused matches every *RefusedError.
var ErrRefused = errors.New("registry: announcement refused")

// RefusedError is an announcement a Registrar refused, with the reason.
type RefusedError struct {
	Tool   string
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("registry: announcement of tool %q refused: %s", e.Tool, e.Reason)
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// PoolWriter announces for one pool of one worker.
type PoolWriter struct {
	Writer Writer
	Pool   string
	Type   toolwirev1.ExecutorType
	Worker string
	// Signer is the worker's signing public key (bus.Bus.Signer).
	Signer string
}

// announce sends op for spec.
func (p PoolWriter) announce(ctx context.Context, op string, spec *toolwirev1.ToolSpec) (Announced, error) {
	b, err := proto.Marshal(spec)
	if err != nil {
		return Announced{}, fmt.Errorf("registry: marshal %s: %w", spec.GetName(), err)
	}
	return p.Writer.Announce(ctx, Announcement{Op: op, Pool: p.Pool, Type: p.Type, Worker: p.Worker, Signer: p.Signer, Spec: b})
}

// Claim makes the pool the source of spec's tool (OpClaim).
func (p PoolWriter) Claim(ctx context.Context, spec *toolwirev1.ToolSpec) error {
	_, err := p.announce(ctx, OpClaim, spec)
	return err
}

// Publish claims and writes specs (OpPublish), or only their versions
// (OpVersions) when versionsOnly.
func (p PoolWriter) Publish(ctx context.Context, specs []*toolwirev1.ToolSpec, versionsOnly bool) error {
	op := OpPublish
	if versionsOnly {
		op = OpVersions
	}
	for _, s := range specs {
		if _, err := p.announce(ctx, op, s); err != nil {
			return err
		}
	}
	return nil
}

// Ensure asks for the consumer of pool p (OpEnsure) and returns its name:
// the dispatchers check the subjects are the pool's and run
// bus.EnsurePool. p's Name and Type must be the PoolWriter's.
func (pw PoolWriter) Ensure(ctx context.Context, p bus.PoolConfig) (string, error) {
	if p.Name != pw.Pool || p.Type != pw.Type {
		return "", fmt.Errorf("registry: ensure: pool %q of type %s through the writer of pool %q of type %s",
			p.Name, bus.TypeToken(p.Type), pw.Pool, bus.TypeToken(pw.Type))
	}
	got, err := pw.Writer.Announce(ctx, Announcement{Op: OpEnsure, Pool: pw.Pool, Type: pw.Type, Worker: pw.Worker, Signer: pw.Signer,
		Consumer: &ConsumerRequest{Subjects: p.Subjects, AckWait: p.AckWait, MaxDeliver: p.MaxDeliver, MaxAckPending: p.MaxAckPending, Shadow: p.Shadow}})
	return got.Consumer, err
}

// ApproveFirst records hash as the approved definition of the MCP tool
// name unless one is recorded, and returns the approved hash (OpApprove).
func (p PoolWriter) ApproveFirst(ctx context.Context, name, hash string) (string, error) {
	got, err := p.Writer.Announce(ctx, Announcement{Op: OpApprove, Pool: p.Pool, Type: p.Type, Worker: p.Worker, Signer: p.Signer, Tool: name, Hash: hash})
	return got.Approved, err
}
