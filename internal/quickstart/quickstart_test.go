package quickstart_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/dispatchd"
)

// command is one command of the quick start: its words as the shell would
// split them, and the output its "# prints: X" comment promises.
type command struct {
	line   string
	argv   []string
	prints string
	exit   int // from an "# exits N" comment
}

// TestReadmeQuickStart runs every command of the README's quick start.
func TestReadmeQuickStart(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := quickStart(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) < 5 {
		t.Fatalf("found only %d commands in the quick start: %v", len(cmds), cmds)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	bin := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+string(os.PathSeparator), "./cmd/...")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	data := t.TempDir()
	api, natsURL := startDispatcher(t, ctx, root, bin, data)

	var lastCallID string
	for _, c := range cmds {
		argv := slicesMap(c.argv, func(w string) string {
			w = strings.ReplaceAll(w, "http://127.0.0.1:8080", api)
			return strings.ReplaceAll(w, "<call id>", lastCallID)
		})
		switch {
		case strings.HasPrefix(argv[0], "./bin/"):
			argv[0] = filepath.Join(bin, strings.TrimPrefix(argv[0], "./bin/"))
		case argv[0] == "curl":
			if _, err := exec.LookPath("curl"); err != nil {
				t.Fatalf("the quick start uses curl, which is not installed: %v", err)
			}
		default:
			t.Fatalf("quick start command %q: only ./bin/ commands and curl are run by this test", c.line)
		}
		if slices.ContainsFunc(argv, func(w string) bool { return strings.HasPrefix(w, "mcp__everything__") }) {
			if _, err := os.Stat(filepath.Join(root, dispatchd.EverythingIndex)); err != nil {
				if os.Getenv("CI") == "true" {
					t.Fatalf("%s: the MCP reference server is not installed (make mcp-everything): %v", c.line, err)
				}
				t.Logf("skipped (the MCP reference server is not installed; make test installs it): %s", c.line)
				continue
			}
		}
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir = root
		// The defaults of the README (127.0.0.1:8080, nats://127.0.0.1:4222,
		// ./data) point at this test's dispatcher.
		cmd.Env = append(os.Environ(), "TOOLWIRE_SERVER="+api, "TOOLWIRE_NATS_URL="+natsURL, "TOOLWIRE_DATA="+data)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", c.line, err)
		}
		if code != c.exit {
			t.Fatalf("%s: exit code %d, the README says %d\nstdout: %s\nstderr: %s", c.line, code, c.exit, stdout.String(), stderr.String())
		}
		if m := callIDLine.FindStringSubmatch(stderr.String()); m != nil {
			lastCallID = m[1]
		}
		if c.prints != "" && strings.TrimSpace(stdout.String()) != c.prints {
			t.Errorf("%s: printed %q, the README says %q", c.line, stdout.String(), c.prints)
		}
		t.Logf("ok: %s", c.line)
	}
}

var (
	callIDLine = regexp.MustCompile(`(?m)^call: ([0-9A-Z]{26})$`)
	exitsRe    = regexp.MustCompile(`^exits (\d+)`)
)

// startDispatcher starts ./bin/dispatcher as `make run` does, on a random
// port and a temporary data directory, and returns its API's URL once it
// serves. It is stopped with SIGTERM when the test ends and must exit 0.
func startDispatcher(t *testing.T, ctx context.Context, root, bin, data string) (api, natsURL string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "dispatcher"), "--data", data, "--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0")
	cmd.Dir = root
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	serving := make(chan [2]string, 1)
	var logMu sync.Mutex
	var log strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		apiRe := regexp.MustCompile(`toolwire dispatcher serving.* api=(http://[0-9.:]+)`)
		natsRe := regexp.MustCompile(`embedded NATS server started.* client_url=(nats://[0-9.:]+)`)
		var natsURL string
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			logMu.Lock()
			log.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			if m := natsRe.FindStringSubmatch(sc.Text()); m != nil {
				natsURL = m[1]
			}
			if m := apiRe.FindStringSubmatch(sc.Text()); m != nil {
				serving <- [2]string{m[1], natsURL}
			}
		}
	}()
	dump := func() string {
		logMu.Lock()
		defer logMu.Unlock()
		return log.String()
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(2 * time.Minute): // the grace period is 25 s
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("the dispatcher did not stop within 2 minutes of SIGINT:\n%s", dump())
		}
		err := cmd.Wait()
		if err != nil {
			t.Errorf("the dispatcher did not exit cleanly on SIGINT: %v\n%s", err, dump())
		}
		if strings.Contains(dump(), "level=ERROR") {
			t.Errorf("the dispatcher logged an error:\n%s", dump())
		}
	})
	select {
	case urls := <-serving:
		if urls[1] == "" {
			t.Fatalf("the dispatcher logged no NATS client URL:\n%s", dump())
		}
		return urls[0], urls[1]
	case <-done:
		t.Fatalf("the dispatcher exited before serving:\n%s", dump())
	case <-ctx.Done():
		t.Fatalf("the dispatcher did not serve in time:\n%s", dump())
	}
	return "", ""
}

// quickStart returns the commands of the "## Quick start" section's sh
// code blocks, but `make` (the test builds and starts the binaries
// itself).
func quickStart(readme string) ([]command, error) {
	_, section, ok := strings.Cut(readme, "\n## Quick start\n")
	if !ok {
		return nil, errors.New("README.md has no '## Quick start' section")
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	var cmds []command
	inBlock := false
	var pending string
	for _, line := range strings.Split(section, "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			inBlock = true
			continue
		case strings.HasPrefix(line, "```"):
			inBlock = false
			continue
		case !inBlock:
			continue
		}
		if strings.HasSuffix(line, "\\") {
			pending += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		line, pending = pending+line, ""
		words, comment, err := splitWords(line)
		if err != nil {
			return nil, fmt.Errorf("quick start line %q: %w", line, err)
		}
		prints, exit := "", 0
		comment = strings.TrimSpace(comment)
		if p, ok := strings.CutPrefix(comment, "prints: "); ok {
			prints = p
		}
		if m := exitsRe.FindStringSubmatch(comment); m != nil {
			exit, _ = strconv.Atoi(m[1])
		}
		// Commands separated by ";"; the comment speaks of the last.
		before := len(cmds)
		var cur []string
		flush := func() {
			if len(cur) > 0 && cur[0] != "make" {
				cmds = append(cmds, command{line: strings.Join(cur, " "), argv: cur})
			}
			cur = nil
		}
		for _, w := range words {
			if w == ";" {
				flush()
				continue
			}
			cur = append(cur, w)
		}
		flush()
		if len(cmds) > before {
			cmds[len(cmds)-1].prints, cmds[len(cmds)-1].exit = prints, exit
		}
	}
	return cmds, nil
}

// splitWords splits a shell line into words (single and double quotes,
// backslash escapes, ";" as a word of its own) and returns the comment
// after an unquoted "#" that starts a word. <placeholders> stay one word.
func splitWords(line string) (words []string, comment string, err error) {
	var cur strings.Builder
	inWord := false
	end := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			end()
		case c == ';':
			end()
			words = append(words, ";")
		case c == '#' && !inWord:
			return words, line[i+1:], nil
		case c == '<' && !inWord:
			j := strings.IndexByte(line[i:], '>')
			if j < 0 {
				return nil, "", errors.New("unclosed <placeholder>")
			}
			cur.WriteString(line[i : i+j+1])
			inWord = true
			i += j
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, "", errors.New("unclosed single quote")
			}
			cur.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '"':
			inWord = true
			for i++; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) {
					i++
				}
				cur.WriteByte(line[i])
			}
			if i >= len(line) {
				return nil, "", errors.New("unclosed double quote")
			}
		case c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	end()
	return words, "", nil
}

func slicesMap(in []string, f func(string) string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = f(s)
	}
	return out
}
