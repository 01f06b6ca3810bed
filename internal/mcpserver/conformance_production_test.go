package mcpserver_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatchd"
	"github.com/toolwire/toolwire/internal/dispatchd/dispatchdtest"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// productionExpectedFailures are the scenarios the production-configured
// endpoint is expected to fail, each with its reason: only scenarios of
// features the endpoint does not declare (TestConformanceProductionConfig
// checks that).
const productionExpectedFailures = "testdata/conformance-production-expected-failures.yaml"

// largeOutput is what the large_output tool returns: more than its
// inline limit (4 KiB), so its result is cut and links to the whole.
var largeOutput = strings.Repeat("a line of the large output\n", 1000)

// largeOutputTool returns largeOutput with a 4 KiB inline limit.
func largeOutputTool() *tool.Tool {
	return tool.Must(tool.New("large_output", func(context.Context, none) (string, error) { return largeOutput, nil },
		tool.WithDescription("Returns more than its inline limit"), tool.ReadOnly(),
		tool.WithLimits(&toolwirev1.Limits{MaxOutputBytes: 4096})))
}

// productionServer runs a dispatcher as the dispatcher binary does
// (dispatchd.Run, which builds the MCP endpoint's configuration: no
// Extra), on a NATS server of the test's, with the suite's fixture tools
// served by its in-process native pool as a binary built with them would
// serve its tools. Two of its flags are set away from their defaults, as
// an operator may on a loaded host: --max-queue-wait 1m (the 2s default
// refuses calls OVERLOADED on a busy test machine) and --mcp-task-after
// 2s (the fixtures' pace; fixture_test.go, taskAfter). It returns the
// MCP endpoint's URL once the fixture tools are listed there.
func productionServer(t *testing.T) string {
	t.Helper()
	env := bustest.Start(t, bus.Config{})
	dir := t.TempDir()
	workerConfig := filepath.Join(dir, "worker.yaml")
	skillsDir, err := filepath.Abs("../../examples/skills/skills")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(workerConfig, []byte(fmt.Sprintf("pools: [{type: native}]\nskills: [%q]\n", skillsDir)), 0o600))
	rc := dispatchd.RunConfig{DataDir: filepath.Join(dir, "data"), HTTPAddr: "127.0.0.1:0", NATSURL: env.URL,
		Workers: "native", WorkerConfig: workerConfig, Grace: 10 * time.Second,
		Tools: append(conformanceTools(func(ctx context.Context, spec *toolwirev1.ToolSpec) error {
			_, err := registry.Publish(ctx, env.Bus.Registry, []*toolwirev1.ToolSpec{spec})
			return err
		}), largeOutputTool()),
		MCPTaskAfter: taskAfter, Dispatcher: dispatch.Config{MaxQueueWait: time.Minute},
		Logger: slog.New(slog.DiscardHandler)}
	url := "http://" + dispatchdtest.Start(t, rc).Addr + mcpserver.Path
	cs := connect(t, url, "any", "2025-11-25")
	require.Eventually(t, func() bool { // the pool's tools reach the registry
		lt, err := cs.ListTools(t.Context(), nil)
		return err == nil && slices.ContainsFunc(lt.Tools, func(tl *mcp.Tool) bool { return tl.Name == "test_simple_text" })
	}, time.Minute, 50*time.Millisecond)
	return url
}

// scenarioFeature is the server capability (server/discover's and
// initialize's capabilities key) whose feature a scored scenario of the
// 2026-07-28 requirements tests; "" = the base protocol and tools, which
// every MCP server serves. known is false for a scenario not mapped here:
// a new suite's scenarios are mapped before they may be expected to fail.
func scenarioFeature(scenario string) (feature string, known bool) {
	switch {
	case strings.HasPrefix(scenario, "prompts-"),
		scenario == "input-required-result-non-tool-request": // its request is prompts/get
		return "prompts", true
	case strings.HasPrefix(scenario, "resources-"), scenario == "sep-2164-resource-not-found":
		return "resources", true
	case scenario == "completion-complete":
		return "completions", true
	case strings.HasPrefix(scenario, "tools-"), strings.HasPrefix(scenario, "input-required-result-"),
		slices.Contains([]string{"server-stateless", "server-sse-multiple-streams", "dns-rebinding-protection", "caching"}, scenario):
		return "", true
	}
	return "", false
}

// methodFeature is the capability a request method belongs to; "" = none
// that a server may leave undeclared.
func methodFeature(method string) string {
	switch {
	case strings.HasPrefix(method, "prompts/"):
		return "prompts"
	case strings.HasPrefix(method, "resources/"):
		return "resources"
	case method == "completion/complete":
		return "completions"
	}
	return ""
}

// The scenarios the production list may name although their feature, or
// the base protocol, is declared: each fails in named checks only, and
// TestConformanceProductionConfig checks every failed check against the
// reason given here. A scenario is added here only with the reason its
// check cannot pass on any production installation.
var (
	// fixtureResources are the scenarios that read a resource only the
	// suite's fixture server has, by its fixed URI: toolwire declares
	// resources, but its resources are the whole outputs of cut results
	// (toolwire://calls/<id>/output, output.go), which no installation
	// has under these URIs. Their only failure may be the read answered
	// "Resource not found"; the test reads one of toolwire's own
	// resources with the same check instead.
	fixtureResources = map[string]string{
		"resources-read-text":      "test://static-text",
		"resources-read-binary":    "test://static-binary",
		"resources-templates-read": "test://template/123/data",
	}
	// mixedScenarios test several features at once; their failed checks
	// may only be requests of a feature not declared ("method not found").
	mixedScenarios = []string{"caching"}
)

// readExpectedFailures reads the production expected-failures file and
// checks that it names only scenarios that may fail on the production
// endpoint whose capabilities are declared, each with its reason (a
// comment "# <scenario>: <reason>").
func readExpectedFailures(t *testing.T, declared map[string]any) []string {
	t.Helper()
	b, err := os.ReadFile(productionExpectedFailures)
	require.NoError(t, err)
	var expected struct {
		Server []string `yaml:"server"`
	}
	require.NoError(t, yaml.Unmarshal(b, &expected))
	for _, scenario := range expected.Server {
		require.Contains(t, string(b), "# "+scenario+":", "%s: scenario %s is listed without a reason", productionExpectedFailures, scenario)
		if _, ok := fixtureResources[scenario]; ok || slices.Contains(mixedScenarios, scenario) {
			continue // their failed checks are checked after the run
		}
		feature, known := scenarioFeature(scenario)
		require.True(t, known, "%s: scenario %s is mapped to no feature (scenarioFeature)", productionExpectedFailures, scenario)
		require.NotEmpty(t, feature, "%s: scenario %s tests the base protocol or tools: it must pass", productionExpectedFailures, scenario)
		require.NotContains(t, declared, feature, "%s: scenario %s tests %s, which the endpoint declares: it must pass",
			productionExpectedFailures, scenario, feature)
	}
	return expected.Server
}

// methodNotFound matches the SDK's answer to a method that is not served.
var methodNotFound = regexp.MustCompile(`method not found: "([a-z/]+)"`)

// requireOnlyUndeclaredFailures checks every failed check of the expected
// failures of a run: a request of a feature the endpoint does not declare
// answered "method not found", or the read of a fixture resource
// answered "Resource not found".
func requireOnlyUndeclaredFailures(t *testing.T, dir string, expected []string, declared map[string]any) {
	t.Helper()
	for _, scenario := range expected {
		runs := scenarioChecks(t, dir, "server-"+scenario+"-2*")
		require.Len(t, runs, 1, "scenario %s ran once", scenario)
		for _, checks := range runs {
			failed := 0
			for _, c := range checks {
				if c.Status != "FAILURE" {
					continue
				}
				failed++
				if _, ok := fixtureResources[scenario]; ok && c.ID == scenario {
					require.Equal(t, "Failed: Resource not found", c.ErrorMessage, "%s: %s", scenario, c.ID)
					continue
				}
				m := methodNotFound.FindStringSubmatch(c.ErrorMessage)
				require.NotNil(t, m, "%s: check %s failed, and not for a method not served: %s", scenario, c.ID, c.ErrorMessage)
				feature := methodFeature(m[1])
				require.NotEmpty(t, feature, "%s: check %s: %s", scenario, c.ID, c.ErrorMessage)
				require.NotContains(t, declared, feature, "%s: check %s: %s is declared: %s", scenario, c.ID, feature, c.ErrorMessage)
			}
			require.Positive(t, failed, "%s passes: take it off %s", scenario, productionExpectedFailures)
		}
	}
}

// readsOwnResource calls the pool's large_output tool, whose result is
// cut to its inline limits, and reads the whole output through the
// resource_link, with the checks the suite's resources-read-text applies
// to its fixture resource: a contents array, not empty, whose first item
// has a uri, a mimeType and text.
func readsOwnResource(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cs := connect(t, url, "any", "2026-07-28")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "large_output", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	link, ok := res.Content[len(res.Content)-1].(*mcp.ResourceLink)
	require.True(t, ok, "the cut result links to the whole: %#v", res.Content)
	r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: link.URI})
	require.NoError(t, err)
	require.NotEmpty(t, r.Contents)
	require.Equal(t, link.URI, r.Contents[0].URI)
	require.NotEmpty(t, r.Contents[0].MIMEType)
	require.Equal(t, largeOutput, r.Contents[0].Text)
}

// The official conformance suite against the MCP endpoint configured as
// production builds it (dispatchd.Run: no fixture prompts, resources or
// completions; the fixture tools are ordinary tools of a worker pool):
// every scored scenario passes but the expected failures, which name only
// checks of features the endpoint does not declare (and the reads of the
// suite's fixture resources, whose read the test makes of a resource of
// toolwire's own instead); every check of the Tasks extension's scenarios
// passes too.
func TestConformanceProductionConfig(t *testing.T) {
	t.Parallel()
	node, modules := mcpClients(t)
	url := productionServer(t)

	res, rpcErr := statelessRPC(t, url, "server/discover", map[string]any{})
	require.Nil(t, rpcErr)
	declared, _ := res["capabilities"].(map[string]any)
	require.Contains(t, declared, "tools", "%v", res)
	t.Logf("declared: %v", declared)
	expected := readExpectedFailures(t, declared)

	dir := conformanceRun{node: node, modules: modules, url: url, expectedFailures: productionExpectedFailures}.run(t)
	requireOnlyUndeclaredFailures(t, dir, expected, declared)
	requireTasksChecksPass(t, dir)
	readsOwnResource(t, url)
	requireSkillsChecksPass(t, node, modules, url)
}

// requireSkillsChecksPass runs the suite's scenarios of MCP's Skills
// extension (SEP-2640), which --requirements does not run (an
// extension), against the endpoint serving examples/skills (whose skill
// has a subdirectory, for the directory scenario's checks): every check
// passes or is informational, and each scenario passes some.
func requireSkillsChecksPass(t *testing.T, node, modules, url string) {
	t.Helper()
	for _, scenario := range []string{"sep-2640-skills-enumeration", "sep-2640-skills-manifest", "sep-2640-skills-directory"} {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		dir := t.TempDir()
		cmd := exec.CommandContext(ctx, node, filepath.Join(modules, "@modelcontextprotocol", "conformance", "dist", "index.js"),
			"server", "--url", url, "--scenario", scenario, "-o", dir)
		cmd.Env = append(os.Environ(), "NO_COLOR=1")
		out, err := cmd.CombinedOutput()
		cancel()
		t.Logf("conformance suite, %s:\n%s", scenario, out)
		runs := scenarioChecks(t, dir, "server-"+scenario+"*")
		require.Len(t, runs, 1, "%s ran once (exit: %v)", scenario, err)
		passed := requireNoFailedCheck(t, runs)
		require.Positive(t, passed, "%s: no check passed", scenario)
		if scenario == "sep-2640-skills-directory" {
			for _, checks := range runs {
				for _, c := range checks {
					require.Equal(t, "SUCCESS", c.Status, "%s: %s: %s", scenario, c.ID, c.ErrorMessage)
				}
			}
		}
	}
}
