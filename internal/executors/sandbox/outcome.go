//go:build linux

package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// outcome maps a finished process to a result or a *tool.Error.
func (e *Executor) outcome(sc *toolwirev1.SandboxConfig, lim limits, reason stopReason, state *os.ProcessState, out *outputs) (*tool.Result, error) {
	stdout := out.stdout.Bytes()
	tail := out.stderrTail()
	if tail == "" { // many programs report errors on stdout
		tail = string(bytes.TrimSpace(stdout[max(0, len(stdout)-e.cfg.StderrTailBytes):]))
	}
	withTail := func(msg string) string {
		if tail != "" {
			msg += ": " + strings.ToValidUTF8(tail, "\uFFFD")
		}
		return msg
	}
	switch reason {
	case stoppedWall:
		return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT, Retryable: true,
			Message: withTail(fmt.Sprintf("wall time limit of %s exceeded; the process was killed", lim.wall))}
	case stoppedOutput:
		if sc.GetJsonOutput() {
			return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMANENT,
				Message: fmt.Sprintf("output limit of %d bytes exceeded; the process was stopped and its JSON output is incomplete", lim.output)}
		}
		text := strings.ToValidUTF8(string(stdout), "\uFFFD") +
			fmt.Sprintf("\n[output truncated at %d bytes: the output limit; the process was stopped]", lim.output)
		return &tool.Result{Content: []*toolwirev1.Content{tool.Text(text)}}, nil
	}
	ws, _ := state.Sys().(syscall.WaitStatus)
	switch {
	case ws.Exited() && ws.ExitStatus() == 0:
		return e.success(sc, stdout)
	case ws.Exited():
		code := ws.ExitStatus()
		msg := withTail(fmt.Sprintf("exit code %d", code) + memoryHint(lim, state))
		if t, ok := sc.GetExitCodes()[int32(code)]; ok {
			te := tool.Errorf(t, "%s", msg)
			return nil, te
		}
		return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, Message: msg}
	case ws.Signaled():
		sig := ws.Signal()
		cpu := state.UserTime() + state.SystemTime()
		cpuLimit := time.Duration(lim.cpu) * time.Second
		switch {
		// The kernel sends SIGKILL at the hard limit (pid 1 ignores SIGXCPU);
		// rusage is sampled and may read a little under the limit.
		case sig == syscall.SIGXCPU || (sig == syscall.SIGKILL && cpu >= cpuLimit*3/4):
			return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMANENT,
				Message: withTail(fmt.Sprintf("cpu limit of %ds exceeded (used %s); killed by %s", lim.cpu, cpu.Round(time.Millisecond), sigName(sig)))}
		case sig == syscall.SIGXFSZ:
			return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMANENT,
				Message: withTail(fmt.Sprintf("file size limit of %d bytes exceeded; killed by SIGXFSZ", lim.fileSize))}
		}
		return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL,
			Message: withTail(fmt.Sprintf("process crashed: killed by %s", sigName(sig)) + memoryHint(lim, state))}
	}
	return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, Message: withTail("process ended oddly: " + state.String())}
}

// memoryHint names the memory limit when the process's peak resident
// size came within half of it: RLIMIT_DATA makes allocations fail rather
// than send a signal, so the cause can only be inferred.
func memoryHint(lim limits, state *os.ProcessState) string {
	ru, ok := state.SysUsage().(*syscall.Rusage)
	if !ok || lim.memory <= 0 {
		return ""
	}
	peak := ru.Maxrss * 1024
	if peak*2 < lim.memory {
		return ""
	}
	return fmt.Sprintf(" (memory limit of %d MiB probably reached: peak resident %d MiB)", lim.memory>>20, peak>>20)
}

func sigName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGKILL: "SIGKILL", syscall.SIGSEGV: "SIGSEGV", syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS",
		syscall.SIGILL: "SIGILL", syscall.SIGFPE: "SIGFPE", syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ",
		syscall.SIGTERM: "SIGTERM", syscall.SIGSYS: "SIGSYS", syscall.SIGPIPE: "SIGPIPE", syscall.SIGTRAP: "SIGTRAP",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}

// success builds the result of an exit code 0: stdout as one text block,
// or with json_output the structured output (and the same JSON as text),
// intents taken out of intents_field.
func (e *Executor) success(sc *toolwirev1.SandboxConfig, stdout []byte) (*tool.Result, error) {
	if !sc.GetJsonOutput() {
		return &tool.Result{Content: []*toolwirev1.Content{tool.Text(strings.ToValidUTF8(string(stdout), "\uFFFD"))}}, nil
	}
	bad := func(msg string) error {
		return &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, Message: "json_output: " + msg}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, stdout); err != nil {
		return nil, bad(fmt.Sprintf("stdout is not JSON: %v", err))
	}
	res := &tool.Result{}
	structured := compact.Bytes()
	if f := sc.GetIntentsField(); f != "" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(structured, &obj); err != nil {
			return nil, bad("stdout is not a JSON object, so it has no intents field")
		}
		if raw, ok := obj[f]; ok && !isNull(raw) {
			var intents []struct {
				Type    string          `json:"type"`
				Payload json.RawMessage `json:"payload"`
			}
			if err := json.Unmarshal(raw, &intents); err != nil {
				return nil, bad(fmt.Sprintf("field %q is not an array of {\"type\", \"payload\"}: %v", f, err))
			}
			for i, in := range intents {
				if in.Type == "" {
					return nil, bad(fmt.Sprintf("intent %d in %q has no type", i, f))
				}
				payload := string(in.Payload)
				if payload == "" {
					payload = "null"
				}
				res.Intents = append(res.Intents, &toolwirev1.Intent{Id: "i" + strconv.Itoa(i+1), Type: in.Type, PayloadJson: payload})
			}
		}
		delete(obj, f)
		var err error
		if structured, err = json.Marshal(obj); err != nil {
			return nil, bad(err.Error())
		}
	}
	res.Structured = structured
	res.Content = []*toolwirev1.Content{tool.Text(string(structured))}
	return res, nil
}
