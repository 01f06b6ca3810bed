package worker

import (
	"context"
	"log/slog"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// callLog logs with a call's attributes, built only when a line is
// written: slog.With per call would cost an allocation-heavy handler
// clone on the hot path. Lines carry the call's context (its trace ids);
// the strings and errors among their arguments are redacted.
type callLog struct {
	ctx      context.Context
	w        *Worker
	call     *toolwirev1.ToolCall
	delivery int32
}

func (c callLog) log(level slog.Level, msg string, args ...any) {
	l := c.w.log
	if !l.Enabled(c.ctx, level) {
		return
	}
	args = redactArgs(c.w.secretsOf(c.call), args)
	l.Log(c.ctx, level, msg, append([]any{"call_id", c.call.CallId, "tool", c.call.Tool, "delivery", c.delivery}, args...)...)
}

func (c callLog) Debug(msg string, args ...any) { c.log(slog.LevelDebug, msg, args...) }
func (c callLog) Info(msg string, args ...any)  { c.log(slog.LevelInfo, msg, args...) }
func (c callLog) Warn(msg string, args ...any)  { c.log(slog.LevelWarn, msg, args...) }
func (c callLog) Error(msg string, args ...any) { c.log(slog.LevelError, msg, args...) }
