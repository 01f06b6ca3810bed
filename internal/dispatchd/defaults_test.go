package dispatchd_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatchd"
	"github.com/toolwire/toolwire/internal/logtest"
	"github.com/toolwire/toolwire/pkg/client"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// TestDefaultServesEveryType: `dispatcher` with no configuration serves a
// working example of every executor type, and warns of nothing but what
// the host lacks (the sandbox's isolation gaps, which a host with cgroup
// v2 and a newer kernel does not have). Before, every start logged the
// embedded server's "Plaintext passwords detected, use nkeys or bcrypt"
// (its in-process user had a random password).
func TestDefaultServesEveryType(t *testing.T) {
	index, err := filepath.Abs(filepath.Join("..", "..", dispatchd.EverythingIndex))
	if err != nil {
		t.Fatal(err)
	}
	_, nodeErr := exec.LookPath("node")
	_, indexErr := os.Stat(index)
	mcpOK := nodeErr == nil && indexErr == nil
	if !mcpOK && os.Getenv("CI") == "true" {
		t.Fatalf("the MCP reference server is missing (node: %v, %v); `make test` installs it", nodeErr, indexErr)
	}
	t.Setenv("TOOLWIRE_MCP_EVERYTHING", index)

	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	var logs logtest.Buffer
	// Made before the cleanup below is registered, so that it is removed
	// after the dispatcher stopped (cleanups run last first); made in the
	// goroutine, it raced the stop ("directory not empty").
	dataDir := t.TempDir()
	go func() {
		done <- dispatchd.Run(ctx, dispatchd.RunConfig{DataDir: dataDir, HTTPAddr: "127.0.0.1:0", Tools: builtin.Tools(),
			Ready: ready, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	defer func() {
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			// The reference server's one tool that requires tasks is
			// disabled with a warning: issue 32's finding 3, open.
			if line != "" && !strings.Contains(line, "isolation is weaker on this host") &&
				!strings.Contains(line, "MCP tool requires task augmentation") {
				t.Errorf("a default start warned: %s", line)
			}
		}
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		done <- nil // for the cleanup, which waits for Run
		t.Fatal(err)
	}
	c, err := client.New("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
	defer ccancel()
	calls := []struct{ tool, args, want string }{
		{"echo", `{"text":"native"}`, "native"},
		{"sha256", `{"text":"hello"}`, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"},
		{"grep_lines", `{"pattern":"-b","text":"a\n-b"}`, "2:-b"},
		{"toolwire_catalog", `{}`, `"sha256"`},
	}
	if mcpOK {
		calls = append(calls, struct{ tool, args, want string }{"mcp__everything__echo", `{"message":"over mcp"}`, "over mcp"})
	} else {
		t.Log("MCP reference server not installed: its call is not checked (CI requires it)")
	}
	for _, call := range calls {
		res, err := c.Call(cctx, call.tool, []byte(call.args))
		if err != nil {
			t.Fatalf("%s: %v", call.tool, err)
		}
		if err := res.Err(); err != nil {
			t.Fatalf("%s: %v", call.tool, err)
		}
		if !strings.Contains(res.Text(), call.want) {
			t.Errorf("%s answered %q, want it to contain %q", call.tool, res.Text(), call.want)
		}
		if res.Response.GetMeta().GetWorker() == "" {
			t.Errorf("%s: no worker in meta", call.tool)
		}
	}
	specs, err := c.ListTools(cctx)
	if err != nil {
		t.Fatal(err)
	}
	types := map[toolwirev1.ExecutorType]int{}
	for _, s := range specs {
		types[s.Executor]++
	}
	for _, typ := range []toolwirev1.ExecutorType{toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE,
		toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX, toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP} {
		if types[typ] == 0 {
			t.Errorf("no %s tool listed: %v", typ, types)
		}
	}
	if mcpOK && types[toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP] < 10 {
		t.Errorf("the reference server's tools are not listed: %v", types)
	}
}

// TestDefaultWorkersNarrowed: `dispatcher --workers native` (and every
// other type) starts with the default configuration and serves that
// type's tools, not the others' (before: "tool toolwire_catalog is a http
// tool, but no http pool is served").
func TestDefaultWorkersNarrowed(t *testing.T) {
	for _, tt := range []struct{ workers, serves, notServes string }{
		{"native", "echo", "sha256"},
		{"sandbox", "sha256", "echo"},
		{"http", "toolwire_catalog", "echo"},
		{"native,sandbox", "sha256", "toolwire_catalog"},
	} {
		t.Run(tt.workers, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			ready := make(chan string, 1)
			done := make(chan error, 1)
			dataDir := t.TempDir()
			go func() {
				done <- dispatchd.Run(ctx, dispatchd.RunConfig{DataDir: dataDir, HTTPAddr: "127.0.0.1:0", Tools: builtin.Tools(),
					Workers: tt.workers, Ready: ready, Logger: slog.New(slog.DiscardHandler)})
			}()
			t.Cleanup(func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			})
			var addr string
			select {
			case addr = <-ready:
			case err := <-done:
				done <- nil // for the cleanup, which waits for Run
				t.Fatalf("--workers %s: %v", tt.workers, err)
			}
			c, err := client.New("http://" + addr)
			if err != nil {
				t.Fatal(err)
			}
			cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
			defer ccancel()
			specs, err := c.ListTools(cctx)
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]bool{}
			for _, s := range specs {
				names[s.Name] = true
			}
			if !names[tt.serves] || names[tt.notServes] {
				t.Errorf("--workers %s lists %v: want %s and not %s", tt.workers, names, tt.serves, tt.notServes)
			}
		})
	}
}
