package bus

import (
	"context"
	"log/slog"
	"maps"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ArchiveHoldMetadata is the stream metadata key with which the archiver
// (internal/archive) marks a MaxAge it raised over the configured one to
// keep messages it has not archived yet: the time (RFC 3339) until which
// the hold stands. While it stands, a dispatcher that ensures the layout
// at its start keeps the raised MaxAge (keepArchiveHold), so a restart
// never makes JetStream drop what is not archived. With an archive
// (Config.RetentionWindow) an archived stream's MaxAge is never lowered
// at open at all, mark or not (keepLongerMaxAge).
const ArchiveHoldMetadata = "toolwire_archive_hold_until"

// keepArchiveHold returns cfg with live's MaxAge and hold mark when live
// carries a hold that stands at now and a MaxAge above cfg's.
func keepArchiveHold(cfg jetstream.StreamConfig, live *jetstream.StreamConfig, now time.Time) jetstream.StreamConfig {
	if live == nil || live.MaxAge <= cfg.MaxAge {
		return cfg
	}
	until, err := time.Parse(time.RFC3339, live.Metadata[ArchiveHoldMetadata])
	if err != nil || !now.Before(until) {
		return cfg
	}
	cfg.MaxAge = live.MaxAge
	cfg.Metadata = maps.Clone(cfg.Metadata)
	if cfg.Metadata == nil {
		cfg.Metadata = map[string]string{}
	}
	cfg.Metadata[ArchiveHoldMetadata] = live.Metadata[ArchiveHoldMetadata]
	return cfg
}

// archived reports whether the stream named name is one an archive keeps
// (calls, results, events) and c has one (RetentionWindow).
func (c Config) archived(name string) bool {
	return c.RetentionWindow > 0 && (name == c.CallsStream() || name == c.ResultsStream() || name == c.EventsStream())
}

// keepLongerMaxAge returns cfg with live's MaxAge (and hold mark, if
// any) when live keeps its messages longer (0 = for ever): with an
// archive, turning it on or shortening the window must not drop at once
// what no archive holds yet. The archiver lowers the MaxAge to the
// window once it has archived every message older than that.
func keepLongerMaxAge(ctx context.Context, log *slog.Logger, cfg jetstream.StreamConfig, live *jetstream.StreamConfig) jetstream.StreamConfig {
	if live == nil || (live.MaxAge != 0 && live.MaxAge <= cfg.MaxAge) {
		return cfg
	}
	log.InfoContext(ctx, "the stream keeps its longer MaxAge until the archiver has archived past the retention window",
		"stream", cfg.Name, "max_age", live.MaxAge, "window", cfg.MaxAge)
	cfg.MaxAge = live.MaxAge
	if mark, ok := live.Metadata[ArchiveHoldMetadata]; ok {
		cfg.Metadata = maps.Clone(cfg.Metadata)
		if cfg.Metadata == nil {
			cfg.Metadata = map[string]string{}
		}
		cfg.Metadata[ArchiveHoldMetadata] = mark
	}
	return cfg
}
