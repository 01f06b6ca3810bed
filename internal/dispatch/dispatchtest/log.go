package dispatchtest

import (
	"log/slog"
	"os"
	"testing"
)

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// testLogger logs warnings and errors through t.Log; TOOLWIRE_TEST_LOG
// (debug, info, ...) lowers the level.
func testLogger(t testing.TB) *slog.Logger {
	level := slog.LevelWarn
	if v := os.Getenv("TOOLWIRE_TEST_LOG"); v != "" {
		_ = level.UnmarshalText([]byte(v))
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}))
}
