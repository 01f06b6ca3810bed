package toolctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/replay"
)

// errLimit stops an audit scan once enough calls were replayed.
var errLimit = errors.New("replay limit reached")

func (a *app) replayCommand() *cobra.Command {
	var (
		since, until string
		f            audit.Filter
		o            replay.Options
		callIDs      []string
		limit        int
	)
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Re-execute recorded calls on a shadow pool and diff the responses",
		Long: `Re-execute recorded calls — by id (--call-id, repeatable) or by the audit
filters — against the tool's current version or a named one (--version),
on a shadow pool: workers started with --shadow, which serve only replays.
Each replay is a new call; the original's result and audit record are not
touched. For each call it prints the differences between the original and
the replayed response (ok, error, content, structured output, intents),
as JSON lines with -o json.

A replay runs the tool again, side effects included: point shadow workers
at staging backends. Talks to NATS directly like 'audit'; with --archive
(env TOOLWIRE_ARCHIVE) it finds calls older than the streams' window in
the archive, and replays them as live ones.

Exit status: 0 when every replay matched, 1 when one differed or could
not be replayed.`,
		Example: `  toolctl replay --call-id 01JD... --version 3f2a...
  toolctl replay --tool send_email --since 1h --limit 20 -o json`,
		Args:              cobra.NoArgs,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return a.connectNATS(cmd) },
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := parseRange(since, until, time.Now(), &f); err != nil {
				return err
			}
			if len(callIDs) == 0 && f == (audit.Filter{}) {
				return errors.New("say which calls to replay: --call-id, or audit filters such as --tool and --since")
			}
			src, done, err := a.openAudit(cmd)
			if err != nil {
				return err
			}
			defer done()
			rp, err := replay.New(cmd.Context(), a.nc, a.nats.prefix)
			if err != nil {
				return &requestError{err}
			}
			differ, n := false, 0
			handle := func(r *audit.Record) error {
				if n >= limit {
					return errLimit
				}
				if n == 0 {
					// Before the first replay: without a shadow pool each
					// would wait its full --wait for nothing.
					if err := rp.CheckShadowPools(cmd.Context()); err != nil {
						return err
					}
				}
				n++
				p := rp.Replay(cmd.Context(), r, o)
				differ = differ || !p.Equal
				return a.printPair(p)
			}
			filters := []audit.Filter{f}
			if len(callIDs) > 0 {
				filters = filters[:0]
				for _, id := range callIDs {
					g := f
					g.CallID = id
					byCallIDTime(&g)
					filters = append(filters, g)
				}
			}
			for _, g := range filters {
				if n >= limit {
					fmt.Fprintf(a.io.Stderr, "stopped at --limit %d\n", limit)
					break
				}
				before := n
				if _, err := src.Run(cmd.Context(), g, audit.Options{}, handle); errors.Is(err, replay.ErrNoShadowPool) {
					fmt.Fprintf(a.io.Stderr, "error: %v\n", err)
					return exitCode(ExitToolError)
				} else if err != nil && !errors.Is(err, errLimit) {
					return &requestError{err}
				}
				if g.CallID != "" && n == before {
					where := "the calls stream"
					if a.archive != "" {
						where = "the calls stream nor the archive"
					}
					fmt.Fprintf(a.io.Stderr, "error: call %s is not in %s\n", g.CallID, where)
					differ = true
				}
			}
			if differ {
				return exitCode(ExitToolError)
			}
			return nil
		},
	}
	a.natsFlags(cmd)
	a.archiveFlag(cmd)
	fl := cmd.Flags()
	fl.StringSliceVar(&callIDs, "call-id", nil, "replay this call (repeatable)")
	fl.StringVar(&o.Version, "version", "", "tool version to replay against (default: the current one)")
	fl.DurationVar(&o.Wait, "wait", time.Minute, "longest wait for each replayed call")
	fl.IntVar(&limit, "limit", 100, "replay at most this many calls")
	fl.StringVar(&since, "since", "", "calls admitted at or after: RFC 3339 time or a duration before now")
	fl.StringVar(&until, "until", "", "calls admitted at or before: RFC 3339 time or a duration before now")
	fl.StringVar(&f.Tenant, "tenant", "", "only this tenant")
	fl.StringVar(&f.Session, "session", "", "only this session")
	fl.StringVar(&f.Agent, "agent", "", "only this agent")
	fl.StringVar(&f.Tool, "tool", "", "only this tool")
	fl.StringVar(&f.Outcome, "outcome", "", "only calls of this outcome or error type")
	return cmd
}

func (a *app) printPair(p *replay.Pair) error {
	if a.json() {
		b, err := json.Marshal(p)
		if err != nil {
			return err
		}
		return a.printJSONLine(b)
	}
	w := a.io.Stdout
	switch {
	case p.Error != "":
		fmt.Fprintf(w, "%s %s: not replayed: %s\n", p.CallID, p.Tool, p.Error)
	case p.Equal:
		fmt.Fprintf(w, "%s %s: same response (version %s -> %s, replay %s)\n", p.CallID, p.Tool, short(p.OriginalVersion), short(p.ReplayVersion), p.ReplayCallID)
	default:
		fmt.Fprintf(w, "%s %s: %d change(s) (version %s -> %s, replay %s)\n", p.CallID, p.Tool, len(p.Changes), short(p.OriginalVersion), short(p.ReplayVersion), p.ReplayCallID)
		for _, c := range p.Changes {
			fmt.Fprintf(w, "  %s: %s -> %s\n", c.Field, c.Original, c.Replay)
		}
	}
	return nil
}
