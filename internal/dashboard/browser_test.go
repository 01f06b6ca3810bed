package dashboard

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/testdeps"
)

// The browser tests run scenario scripts (Node.js, playwright-core) from
// e2eDir against a server the test starts, in Debian's chromium:
//
//	make dashboard-e2e   # playwright-core from the committed lockfile
//	make chromium        # /usr/bin/chromium (apt-get)
//
// Without them a browser test fails under CI=true and is skipped otherwise
// (testdeps.Missing). The scripts import e2eDir/lib.mjs, which documents
// the environment they read.
const e2eDir = "../../testdata/dashboard-e2e"

// defaultChromium is the browser the scripts launch unless CHROMIUM names
// another.
const defaultChromium = "/usr/bin/chromium"

// browserTimeout bounds one script (less when the test's own deadline is
// nearer). The script is told a bound browserGrace shorter, so that it
// reports the state of its page and closes the browser itself before its
// process group is killed.
const (
	browserTimeout = 3 * time.Minute
	browserGrace   = 10 * time.Second
)

// runBrowser runs the scenario script testdata/dashboard-e2e/<script> with
// node, with env added to the test's environment, and fails t when it exits
// non-zero (or does not end within its bound). Every line it prints is
// logged with t.Log as it comes.
//
// runBrowser sets, unless env does:
//
//	SHOT_DIR    where shot() writes PNGs: $DASHBOARD_SHOTS when set (make
//	            dashboard-screenshots: docs/images; a relative path is
//	            taken from internal/dashboard), else a t.TempDir()
//	TIMEOUT_MS  the script's bound (browserTimeout, or less near the
//	            test's deadline, minus browserGrace)
//	CHROMIUM    the browser: $CHROMIUM, else /usr/bin/chromium
//
// The caller sets BASE_URL (the server's URL, without /ui) and whatever
// else its script reads (API keys, ...). On return no process of the run
// is left: the script's process group is killed, and so is every process
// that carries the run's marker in its environment (the browser runs in a
// process group of its own).
func runBrowser(t *testing.T, script string, env map[string]string) {
	t.Helper()
	node, dir, browser := browserDeps(t)
	path := filepath.Join(dir, script)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("runBrowser: no scenario script: %v", err)
	}

	timeout := browserTimeout
	if d, ok := t.Deadline(); ok && time.Until(d)-browserGrace < timeout {
		timeout = time.Until(d) - browserGrace
	}
	if timeout < 2*browserGrace {
		t.Fatalf("runBrowser: %v left before the test's deadline: too little for a browser", timeout+browserGrace)
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()

	shots := os.Getenv("DASHBOARD_SHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else {
		var err error
		if shots, err = filepath.Abs(shots); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(shots, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	marker := runMarker(t)
	vars := []string{
		"NO_COLOR=1",
		"SHOT_DIR=" + shots,
		"TIMEOUT_MS=" + strconv.FormatInt((timeout-browserGrace).Milliseconds(), 10),
		"CHROMIUM=" + browser,
		// The browser's profile and other temporary files: removed with
		// the test's temporary directories.
		"TMPDIR=" + t.TempDir(),
		markerVar + "=" + marker,
	}
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}

	out := &lineLogger{t: t, prefix: script + ": "}
	cmd := exec.CommandContext(ctx, node, path)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), vars...) // later entries win
	cmd.Stdout, cmd.Stderr = out, out       // one pipe: the lines stay in order
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// At the bound, SIGTERM to the script's group (Playwright closes its
	// browser on it); SIGKILL of the script itself WaitDelay later.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second

	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("runBrowser: %v", err)
	}
	err := cmd.Wait()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if n := killMarked(marker); n > 0 {
		t.Logf("runBrowser: %d process(es) of %s were still running; killed", n, script)
	}
	out.flush()
	switch {
	case ctx.Err() != nil:
		t.Fatalf("runBrowser: %s did not end within %v (%v)", script, timeout, err)
	case err != nil:
		t.Fatalf("runBrowser: %s failed after %v: %v (its output is above)", script, time.Since(start).Round(time.Millisecond), err)
	}
	t.Logf("runBrowser: %s passed in %v", script, time.Since(start).Round(time.Millisecond))
}

// browserDeps returns a Node.js (20 or later, as playwright-core needs),
// the absolute scenario folder (with playwright-core installed) and the
// browser, or ends t through testdeps.Missing.
func browserDeps(t *testing.T) (node, dir, browser string) {
	t.Helper()
	dir, err := filepath.Abs(e2eDir)
	if err != nil {
		t.Fatal(err)
	}
	node, err = exec.LookPath("node")
	if err != nil {
		testdeps.Missing(t, "install Node.js 20 or later", "the browser tests need Node.js: %v", err)
	}
	v, err := exec.Command(node, "--version").Output()
	if err != nil {
		testdeps.Missing(t, "install Node.js 20 or later", "%s --version: %v", node, err)
	}
	major, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(string(v)), "v"), ".")
	if n, _ := strconv.Atoi(major); n < 20 {
		testdeps.Missing(t, "install Node.js 20 or later", "%s is Node.js %s; playwright-core needs 20 or later", node, strings.TrimSpace(string(v)))
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core", "package.json")); err != nil {
		testdeps.Missing(t, "run `make dashboard-e2e`", "playwright-core is not installed: %v", err)
	}
	browser = os.Getenv("CHROMIUM")
	if browser == "" {
		browser = defaultChromium
	}
	if fi, err := os.Stat(browser); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		testdeps.Missing(t, "run `make chromium`, or set CHROMIUM to a Chromium", "no Chromium at %s: %v", browser, err)
	}
	return node, dir, browser
}

// markerVar names the environment variable that marks every process of
// one runBrowser: the script, the browser and the browser's children
// inherit it, wherever they are in the process tree.
const markerVar = "TOOLWIRE_BROWSER_RUN"

func runMarker(t *testing.T) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + "-" + hex.EncodeToString(b)
}

// killMarked SIGKILLs every process whose environment has markerVar=marker
// until none is left (at most a few rounds: a dying browser may still
// start a child), and returns how many it found.
func killMarked(marker string) int {
	want := []byte(markerVar + "=" + marker + "\x00")
	killed := map[int]bool{}
	for round := 0; round < 5; round++ {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return len(killed)
		}
		found := false
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
			if err != nil || !bytes.Contains(append([]byte{0}, b...), append([]byte{0}, want...)) {
				continue
			}
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				found = true
				killed[pid] = true
			}
		}
		if !found {
			break
		}
		time.Sleep(50 * time.Millisecond) // let the killed exit before looking again
	}
	return len(killed)
}

// lineLogger passes what a script writes to t.Log, a line at a time.
type lineLogger struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.t.Log(l.prefix + string(bytes.TrimRight(l.buf[:i], "\r")))
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.t.Log(l.prefix + string(l.buf))
		l.buf = nil
	}
}

// The browser-test infrastructure on its own (no dashboard code): Chromium
// loads a static sign-in page from a test server and takes a screenshot of
// it.
func TestBrowserSmoke(t *testing.T) {
	t.Parallel()
	var hits sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Store(r.URL.Path, true)
		if r.URL.Path != "/ui/signin" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = fmt.Fprint(w, `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign in</title></head>`+
			`<body><form method=post><input name=key type=password><button type=submit>Sign in</button></form></body></html>`)
	}))
	t.Cleanup(srv.Close)
	shots := t.TempDir() // not $DASHBOARD_SHOTS: this page is no dashboard's
	runBrowser(t, "smoke.mjs", map[string]string{"BASE_URL": srv.URL, "SHOT_DIR": shots})

	if _, ok := hits.Load("/ui/signin"); !ok {
		t.Error("the browser never asked for /ui/signin")
	}
	png, err := os.ReadFile(filepath.Join(shots, "signin.png"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("signin.png is not a PNG (%d bytes)", len(png))
	}
}
