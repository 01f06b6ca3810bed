package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/toolworker"
)

// Input of the ledger tool.
type Input struct {
	// Milliseconds to work before answering, honouring cancellation.
	SleepMS int `json:"sleep_ms,omitempty"`
	// Text echoed back.
	Text string `json:"text,omitempty"`
}

type entry struct {
	CallID  string `json:"call_id"`
	Attempt int32  `json:"attempt"`
	PID     int    `json:"pid"`
	Phase   string `json:"phase"`
	Text    string `json:"text,omitempty"`
	At      int64  `json:"at"`
}

func main() {
	args := os.Args[1:]
	path := os.Getenv("LEDGER_FILE")
	for i := 0; i < len(args); i++ {
		if args[i] == "--ledger" && i+1 < len(args) {
			path = args[i+1]
			args = append(args[:i:i], args[i+2:]...)
			break
		}
	}
	if path == "" {
		fmt.Fprintln(os.Stderr, "ledgerworker: --ledger FILE is required")
		os.Exit(2)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer f.Close()
	record := func(ctx context.Context, phase, text string) error {
		info, _ := tool.CallInfoFrom(ctx)
		b, _ := json.Marshal(entry{CallID: info.CallID, Attempt: info.Attempt, PID: os.Getpid(), Phase: phase, Text: text, At: time.Now().UnixNano()})
		_, err := f.Write(append(b, '\n'))
		return err
	}
	run := func(ctx context.Context, in Input) (string, error) {
		if err := record(ctx, "start", in.Text); err != nil {
			return "", err
		}
		if in.SleepMS > 0 {
			t := time.NewTimer(time.Duration(in.SleepMS) * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				_ = record(ctx, "stopped", in.Text)
				return "", ctx.Err()
			}
		}
		if err := record(ctx, "done", in.Text); err != nil {
			return "", err
		}
		return in.Text, nil
	}
	ledger := tool.Must(tool.New("ledger", run, tool.WithDescription("Records each execution in a ledger file; not idempotent.")))
	ledgerIdem := tool.Must(tool.New("ledger_idem", run, tool.Idempotent(),
		tool.WithDescription("Records each execution in a ledger file; idempotent, so reruns are allowed.")))
	poison := tool.Must(tool.New("poison", func(ctx context.Context, in Input) (string, error) {
		if err := record(ctx, "start", in.Text); err != nil {
			return "", err
		}
		os.Exit(137) // crashes the worker on every delivery
		return "", nil
	}, tool.Idempotent(), tool.WithDescription("Crashes its worker process; for MaxDeliver tests.")))
	os.Exit(toolworker.MainArgs(args, os.Stderr, ledger, ledgerIdem, poison))
}
