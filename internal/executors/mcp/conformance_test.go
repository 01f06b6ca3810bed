package mcp_test

import (
	"testing"

	"github.com/toolwire/toolwire/internal/executors/executortest"
	"github.com/toolwire/toolwire/internal/executors/mcp"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// subject maps the fixture server's tools onto the suite's fixtures.
func subject(e *mcp.Executor, runningDir string) executortest.Subject {
	byTool := specsByTool(e)
	tools := map[executortest.Fixture]*toolwirev1.ToolSpec{}
	for _, f := range []executortest.Fixture{
		executortest.Echo, executortest.Structured, executortest.Image, executortest.Audio,
		executortest.ResourceLink, executortest.Resource, executortest.Block, executortest.Progress,
		executortest.Panic, executortest.Big, executortest.Intents, executortest.Fail,
	} {
		if s := byTool[string(f)]; s != nil {
			tools[f] = s
		}
	}
	return executortest.Subject{
		Executor: e,
		Tools:    tools,
		Running:  running(runningDir),
		Image:    fixturePNG,
		Audio:    fixtureWAV,
		Fail:     fixtureFail,
		BadArgs:  []byte(`{"text": 12}`),
		Expect: map[executortest.Fixture]toolwirev1.ErrorType{
			// A stdio server that panics dies: the connection drops mid-call.
			executortest.Panic: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT,
		},
	}
}

// TestConformanceStdio runs the suite against the test binary as a stdio
// server (every fixture, the panic included: it kills the server, which
// is restarted for the next checks).
func TestConformanceStdio(t *testing.T) {
	t.Parallel()
	dir := tempDir(t)
	e := newExecutor(t, testConfig(stdioServer(t, "fixture", map[string]string{envRunning: dir})), mcp.Options{})
	executortest.Run(t, subject(e, dir))
}

// TestConformanceHTTP runs the suite against the fixture server in this
// process over streamable HTTP (no panic fixture: the SDK does not recover
// handler panics, so it would take the test binary down).
func TestConformanceHTTP(t *testing.T) {
	t.Parallel()
	dir := tempDir(t)
	url := httpServer(t, newFixtureServer(fixtureOptions{running: dir}))
	e := newExecutor(t, testConfig(mcp.ServerConfig{Name: "fixture", HTTP: &mcp.HTTPConfig{URL: url + "/mcp"}, Required: true}), mcp.Options{})
	executortest.Run(t, subject(e, dir))
}
