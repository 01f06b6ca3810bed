package bus

import "github.com/nats-io/nats.go"

// InternalKeyOption is the in-process user's credential as a client
// option, for tests that try it over TCP.
func (e *Embedded) InternalKeyOption() nats.Option {
	return nats.Nkey(e.internalPub(), e.internalKey.Sign)
}
