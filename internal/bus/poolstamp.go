package bus

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Pool consumers stamped with their declaration.
//
// Every replica of a pool declares its consumer (EnsurePool), and during
// a rolling upgrade that changes AckWait or MaxDeliver two declarations
// are live at once. A worker that put back every difference from its own
// declaration would undo the other's every check, for ever. So EnsurePool
// stamps what it declares in the consumer's metadata: PoolStampKey, a
// hash of the settings (PoolStamp), and PoolByKey, who declared them (the
// build of the process). A live consumer whose settings hash to its own
// stamp is some process's declaration, left as it is; one whose settings
// do not (or that has no stamp) was changed by hand, and is put back.

// PoolStampKey is the metadata key of a pool consumer's stamp: PoolStamp
// of the settings EnsurePool declared.
const PoolStampKey = "toolwire_pool_settings"

// PoolByKey is the metadata key naming the build that declared a pool
// consumer's settings (module version and VCS revision, when known).
const PoolByKey = "toolwire_pool_by"

// PoolStamp is the stamp of a pool consumer's settings: a hash of every
// setting but its name, filters, metadata and pause (filters only grow, as
// each replica's tools add theirs, so they are no part of a declaration;
// a pause is an administrator's, checked against its record: poolpause.go).
func PoolStamp(cfg jetstream.ConsumerConfig) string {
	cfg.Name, cfg.Durable, cfg.FilterSubject, cfg.FilterSubjects, cfg.Metadata = "", "", "", nil, nil
	cfg.PauseUntil = nil
	data, err := json.Marshal(cfg)
	if err != nil { // a ConsumerConfig always encodes
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12])
}

// declarer is PoolByKey's value for this process.
var declarer = sync.OnceValue(func() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	by := info.Main.Path + "@" + info.Main.Version
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			by += " " + s.Value[:min(12, len(s.Value))]
		}
	}
	return by
})

// stampPool sets cfg's stamp and declarer.
func stampPool(cfg *jetstream.ConsumerConfig) {
	if cfg.Metadata == nil {
		cfg.Metadata = map[string]string{}
	}
	cfg.Metadata[PoolStampKey] = PoolStamp(*cfg)
	cfg.Metadata[PoolByKey] = declarer()
}

// PoolCheck is how a pool's live consumer stands against the declaration
// of the process that checks it (CheckPool).
type PoolCheck struct {
	// Edited lists what a hand changed (PoolDrift against the declared
	// configuration, "max_deliver: 2 → 5"): settings that no longer hash
	// to the consumer's stamp, or a declared filter missing. Not empty =
	// put the declaration back.
	Edited []string
	// Foreign is another process's declaration, whole (its settings hash
	// to its stamp), that differs from this one's; nil when the live
	// consumer holds this process's settings. Left as it is.
	Foreign *Declaration
}

// Declaration is a pool consumer's stamp, who made it, and how its
// settings differ from the checker's ("max_deliver: 3 → 5": live →
// declared by the checker).
type Declaration struct {
	Stamp, By string
	Differs   []string
}

// CheckPool compares a pool's live consumer configuration with declared,
// the one the checking process made (EnsurePool's, stamped).
func CheckPool(live, declared jetstream.ConsumerConfig) PoolCheck {
	var out PoolCheck
	have := ConsumerFilters(live)
	var missing []string
	for _, f := range ConsumerFilters(declared) {
		if !slices.Contains(have, f) {
			missing = append(missing, f)
		}
	}
	stamp := live.Metadata[PoolStampKey]
	pause := pauseDrift(live)
	switch {
	case stamp == "" || stamp != PoolStamp(live):
		out.Edited = PoolDrift(live, declared)
		if len(out.Edited) == 0 { // the same settings, stamp removed
			out.Edited = []string{PoolStampKey + ": " + render(stamp) + " → " + render(declared.Metadata[PoolStampKey])}
		}
		if pause != "" {
			out.Edited = append(out.Edited, pause)
		}
		return out
	case stamp != declared.Metadata[PoolStampKey]:
		l, d := live, declared
		l.Metadata, d.Metadata = nil, nil
		out.Foreign = &Declaration{Stamp: stamp, By: live.Metadata[PoolByKey], Differs: PoolDrift(l, d)}
	}
	if len(missing) > 0 {
		out.Edited = []string{"filter_subjects: missing " + strings.Join(missing, ", ")}
	}
	if pause != "" {
		out.Edited = append(out.Edited, pause)
	}
	return out
}
