//go:build linux

package sandbox_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/toolwire/toolwire/internal/executors/executortest"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestConformance(t *testing.T) {
	e := setup(t)
	// The Block fixture sleeps for an unusual duration, so Running can
	// find exactly its process.
	blockArg := fmt.Sprintf("%d.5", 900000+rand.IntN(99999))
	textArg := func(sc *toolwirev1.SandboxConfig) { sc.OptionArgs = []string{"text"} }
	jsonOut := func(sc *toolwirev1.SandboxConfig) { sc.JsonOutput = true }
	executortest.Run(t, executortest.Subject{
		Executor: e,
		Tools: map[executortest.Fixture]*toolwirev1.ToolSpec{
			executortest.Echo:       spec([]string{"/usr/bin/printf", "--", "%s", "{text}"}, textArg),
			executortest.Structured: spec(fixture("structured", "--", "{text}"), textArg, jsonOut),
			executortest.Block:      spec([]string{"/usr/bin/sleep", blockArg}),
			executortest.Panic:      spec(fixture("segv")),
			executortest.Big:        spec(fixture("big", "--", "{bytes}")),
			executortest.Intents: spec(fixture("intents"), jsonOut, func(sc *toolwirev1.SandboxConfig) {
				sc.IntentsField = "intents"
			}),
			executortest.Fail: spec(fixture("fail", "--", "{type}"), func(sc *toolwirev1.SandboxConfig) {
				sc.ExitCodes = map[int32]toolwirev1.ErrorType{
					75: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT,
					76: toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT,
					65: toolwirev1.ErrorType_ERROR_TYPE_VALIDATION,
				}
			}),
		},
		Running: func() bool { return len(processesMatching("/usr/bin/sleep\x00"+blockArg+"\x00")) > 0 },
		Fail: map[string]toolwirev1.ErrorType{
			"transient":  toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT,
			"rate_limit": toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT,
			"validation": toolwirev1.ErrorType_ERROR_TYPE_VALIDATION,
			"permanent":  toolwirev1.ErrorType_ERROR_TYPE_PERMANENT,
		},
		BadArgs: []byte(`{"text":{"nested":"object"}}`),
	})
}
