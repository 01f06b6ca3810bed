package limits

import "errors"

// ErrInvalid is wrapped by every error about the arguments of a call: a
// tenant that is not bus.ValidTenant, an empty limit id, a rate, burst,
// budget, cost or lease out of range, a fingerprint that is not hex
// SHA-256. Nothing was read or written.
var ErrInvalid = errors.New("limits: invalid argument")

// ErrContention is returned when a key was changed by other replicas
// between every read and write of Config.MaxAttempts attempts. Nothing was
// admitted or spent; the caller may refuse (fail closed) or try again.
var ErrContention = errors.New("limits: key updated concurrently too often")

// ErrCorrupt is returned when a stored value cannot be decoded (something
// other than this package wrote the bucket). The key heals when its TTL
// runs out; until then the limit answers this error.
var ErrCorrupt = errors.New("limits: stored state cannot be decoded")

// ErrClosed is returned by calls on a Store after Close.
var ErrClosed = errors.New("limits: store closed")
