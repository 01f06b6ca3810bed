package bench

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatchd"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Attack is one class of hostile request sent to the dispatcher's API.
type Attack struct {
	Name string
	// Size is the request body's length as sent (compressed, for a gzip
	// body).
	Size int64
	// Want is the answer the dispatcher must give: a Connect error code,
	// or "ok"/an error type for a request that reaches admission.
	Want        string
	contentType string
	encoding    string
	body        func() io.Reader
}

// AttackResult is one attack sent by Parallel callers at once, in
// AttackRounds rounds, to a dispatcher process of its own.
type AttackResult struct {
	Attack   Attack
	Parallel int
	// Answers counts the answers received, by answer.
	Answers map[string]int
	// Times are the durations from sending a request to its answer, all
	// rounds together, sorted.
	Times []time.Duration
	// PeakGrowth is the dispatcher process's peak resident memory (VmHWM,
	// reset before the first round) less its resident memory before the
	// first round; Retained is the resident memory a second after the
	// last round less the same.
	PeakGrowth, Retained int64
	// CPU is the dispatcher process's CPU time (user and system) over all
	// rounds, which other load on the machine disturbs far less than the
	// answer times.
	CPU time.Duration
}

// CPUPerRequest is the dispatcher's CPU time per request.
func (r AttackResult) CPUPerRequest() time.Duration { return r.CPU / time.Duration(len(r.Times)) }

// Max is the slowest answer.
func (r AttackResult) Max() time.Duration { return r.Times[len(r.Times)-1] }

// Median is the median answer time.
func (r AttackResult) Median() time.Duration { return r.Times[(len(r.Times)-1)/2] }

// AttackRounds is how many times each attack is repeated per dispatcher.
const AttackRounds = 5

// AttackParallel are the numbers of simultaneous attackers measured.
var AttackParallel = []int{1, 10}

// Attacks returns the hostile requests measured against the default
// limits of dispatch.Config.
func Attacks() []Attack {
	def := dispatch.Config{}.WithDefaults()
	limit, values := def.MaxRequestBytes, def.MaxArgsValues
	var out []Attack
	add := func(name, want string, body []byte) {
		out = append(out, Attack{Name: name, Size: int64(len(body)), Want: want, contentType: "application/json",
			body: func() io.Reader { return bytes.NewReader(body) }})
	}
	out = append(out, Attack{Name: "100 MB body (arguments_json), streamed", Size: 100 << 20, Want: "resource_exhausted",
		contentType: "application/json", body: func() io.Reader { return stringBody(100 << 20) }})
	add("1M keys in arguments", "resource_exhausted", keysBody(1_000_000, 0))
	add("keys in arguments, at the body limit", "invalid_argument", keysBody(0, limit-64))
	add("long array in arguments, at the body limit", "invalid_argument", arrayBody(limit-64))
	add("deep objects, at the body limit", "invalid_argument", deepBody(`{"a":`, "}", limit-64))
	add("deep arrays, at the body limit", "invalid_argument", deepBody("[", "]", limit-64))
	pb := protoKeysBody(limit - 64)
	out = append(out, Attack{Name: "keys in arguments, binary protobuf, at the body limit", Size: int64(len(pb)), Want: "invalid_argument",
		contentType: "application/proto", body: func() io.Reader { return bytes.NewReader(pb) }})
	bomb := gzipBomb(200 << 20)
	out = append(out, Attack{Name: "gzip bomb (inflates to 200 MB)", Size: int64(len(bomb)), Want: "resource_exhausted",
		contentType: "application/json", encoding: "gzip", body: func() io.Reader { return bytes.NewReader(bomb) }})
	add(fmt.Sprintf("widest legal arguments (%d keys)", values-10), "VALIDATION", keysBody(values-10, 0))
	add("widest legal arguments_json (keys, at the body limit)", "VALIDATION", keysJSONBody(limit-64))
	return out
}

// keysBody is a Call of echo whose arguments object has n keys, or as many
// as fit in size bytes.
func keysBody(n int, size int64) []byte {
	var b bytes.Buffer
	b.WriteString(`{"tool":"echo","arguments":{`)
	for i := 0; n > 0 && i < n || size > 0 && int64(b.Len()) < size-2; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + strconv.FormatInt(int64(i), 36) + `":0`)
	}
	b.WriteString("}}")
	return b.Bytes()
}

// keysJSONBody is a Call of echo whose arguments_json has as many keys as
// fit, escaped, in a body of size bytes.
func keysJSONBody(size int64) []byte {
	const head, tail = `{"tool":"echo","argumentsJson":"{`, `}"}`
	var b bytes.Buffer
	b.WriteString(head)
	for i := 0; ; i++ {
		key := `\"` + strconv.FormatInt(int64(i), 36) + `\":0`
		if i > 0 {
			key = "," + key
		}
		if int64(b.Len()+len(key)+len(tail)) > size {
			break
		}
		b.WriteString(key)
	}
	b.WriteString(tail)
	return b.Bytes()
}

func arrayBody(size int64) []byte {
	var b bytes.Buffer
	b.WriteString(`{"tool":"echo","arguments":{"a":[0`)
	for int64(b.Len()) < size-3 {
		b.WriteString(",0")
	}
	b.WriteString("]}}")
	return b.Bytes()
}

func deepBody(open, close string, size int64) []byte {
	n := int((size - 40) / int64(len(open)+len(close)))
	return []byte(`{"tool":"echo","arguments":{"a":` + strings.Repeat(open, n) + strings.Repeat(close, n) + "}}")
}

func protoKeysBody(size int64) []byte {
	fields := map[string]*structpb.Value{}
	var b []byte
	for i := 0; ; i += 1000 {
		for j := i; j < i+1000; j++ {
			fields[strconv.FormatInt(int64(j), 36)] = structpb.NewNumberValue(0)
		}
		next, _ := proto.Marshal(&toolwirev1.CallRequest{Tool: "echo", Arguments: &structpb.Struct{Fields: fields}})
		if int64(len(next)) > size {
			return b
		}
		b = next
	}
}

func gzipBomb(inflated int64) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = io.Copy(zw, stringBody(inflated))
	_ = zw.Close()
	return b.Bytes()
}

// stringBody is a Call of echo of n bytes whose arguments_json is one
// long string, produced as it is read.
func stringBody(n int64) io.Reader {
	head, tail := `{"tool":"echo","arguments_json":"{\"text\":\"`, `\"}"}`
	return io.MultiReader(strings.NewReader(head), io.LimitReader(xs{}, n-int64(len(head)+len(tail))), strings.NewReader(tail))
}

type xs struct{}

func (xs) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// MeasureAttacks sends every attack, alone and AttackParallel at once, to
// a dispatcher process of its own (this binary with -attack-server: the
// dispatcher of cmd/dispatcher with its embedded server and a native
// worker pool, default limits), and measures the time to each answer and
// the process's resident memory. Only the attacks whose name contains
// match are sent. progress gets a line per measurement.
func MeasureAttacks(ctx context.Context, cfg Config, match string, progress io.Writer) ([]AttackResult, error) {
	var out []AttackResult
	for _, a := range Attacks() {
		if !strings.Contains(a.Name, match) {
			continue
		}
		for _, p := range AttackParallel {
			r, err := measureAttack(ctx, cfg, a, p)
			if err != nil {
				return out, fmt.Errorf("bench: attack %q ×%d: %w", a.Name, p, err)
			}
			fmt.Fprintf(progress, "%s ×%d: %v, max %s, peak RSS +%.1f MiB\n", a.Name, p, r.Answers, r.Max().Round(time.Millisecond), mib(r.PeakGrowth))
			out = append(out, r)
		}
	}
	return out, nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func measureAttack(ctx context.Context, cfg Config, a Attack, parallel int) (r AttackResult, err error) {
	r = AttackResult{Attack: a, Parallel: parallel, Answers: map[string]int{}}
	srv, err := startAttackServer(ctx, cfg)
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, srv.stop()) }()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: parallel, DisableCompression: true}}
	defer client.CloseIdleConnections()
	// Warm up: the server's first calls set up what every later call
	// reuses.
	for range 20 {
		if ans, _ := send(ctx, client, srv.url, Attack{contentType: "application/json",
			body: func() io.Reader { return strings.NewReader(`{"tool":"echo","arguments":{"text":"warm"}}`) }}); ans != "ok" {
			return r, fmt.Errorf("warm-up call answered %s", ans)
		}
	}
	before, err := srv.rss("VmRSS")
	if err != nil {
		return r, err
	}
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", srv.pid()), []byte("5"), 0); err != nil {
		return r, fmt.Errorf("reset peak RSS: %w", err)
	}
	cpu0, err := srv.cpu()
	if err != nil {
		return r, err
	}
	for range AttackRounds {
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range parallel {
			wg.Go(func() {
				<-start
				ans, d := send(ctx, client, srv.url, a)
				mu.Lock()
				defer mu.Unlock()
				r.Answers[ans]++
				r.Times = append(r.Times, d)
			})
		}
		close(start)
		wg.Wait()
	}
	slices.Sort(r.Times)
	cpu1, err := srv.cpu()
	if err != nil {
		return r, err
	}
	r.CPU = cpu1 - cpu0
	peak, err := srv.rss("VmHWM")
	if err != nil {
		return r, err
	}
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
		return r, ctx.Err()
	}
	after, err := srv.rss("VmRSS")
	if err != nil {
		return r, err
	}
	r.PeakGrowth, r.Retained = peak-before, after-before
	if r.Answers[a.Want] != parallel*AttackRounds {
		return r, fmt.Errorf("answers %v, want %s to every request", r.Answers, a.Want)
	}
	return r, nil
}

// send sends one request of a and classifies the answer: the Connect
// error code, or for an answered call "ok" or its error type.
func send(ctx context.Context, c *http.Client, url string, a Attack) (string, time.Duration) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/toolwire.v1.DispatcherService/Call", a.body())
	if err != nil {
		return "request: " + err.Error(), time.Since(start)
	}
	req.Header.Set("Content-Type", a.contentType)
	if a.encoding != "" {
		req.Header.Set("Content-Encoding", a.encoding)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "transport error", time.Since(start)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	d := time.Since(start)
	if err != nil {
		return "transport error", d
	}
	if resp.StatusCode != http.StatusOK {
		var ce struct{ Code string }
		if json.Unmarshal(body, &ce) != nil || ce.Code == "" {
			return "HTTP " + strconv.Itoa(resp.StatusCode), d
		}
		return ce.Code, d
	}
	var cr struct {
		Response struct {
			Ok    bool
			Error struct{ Type string }
		}
	}
	if a.contentType != "application/json" || json.Unmarshal(body, &cr) != nil {
		return "HTTP 200", d
	}
	if cr.Response.Ok {
		return "ok", d
	}
	return strings.TrimPrefix(cr.Response.Error.Type, "ERROR_TYPE_"), d
}

// attackServer is a dispatcher process serving the API on loopback.
type attackServer struct {
	cmd *exec.Cmd
	dir string
	url string
}

func startAttackServer(ctx context.Context, cfg Config) (*attackServer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cfg.TempDir, "toolwire-attack-")
	if err != nil {
		return nil, err
	}
	s := &attackServer{dir: dir, cmd: exec.CommandContext(ctx, self, "-attack-server", dir, "-log-level", "error")}
	s.cmd.Cancel = func() error { return s.cmd.Process.Signal(syscall.SIGTERM) }
	s.cmd.WaitDelay = 30 * time.Second
	s.cmd.Stderr = os.Stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	if err := s.cmd.Start(); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "READY ")
	if err != nil || !ok {
		return nil, errors.Join(fmt.Errorf("attack server said %q: %w", line, err), s.stop())
	}
	s.url = "http://" + addr
	return s, nil
}

func (s *attackServer) pid() int { return s.cmd.Process.Pid }

// rss reads a memory figure of the server process (VmRSS, VmHWM), in bytes.
func (s *attackServer) rss(field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid()))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, s.pid())
}

// cpu reads the server process's CPU time (utime and stime of
// /proc/<pid>/stat, in clock ticks of 10ms).
func (s *attackServer) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.pid()))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces: the fields follow its ')'.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", s.pid())
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

func (s *attackServer) stop() error {
	err := s.cmd.Process.Signal(syscall.SIGTERM)
	if werr := s.cmd.Wait(); werr != nil && err == nil {
		err = werr
	}
	return errors.Join(err, os.RemoveAll(s.dir))
}

// AttackServer is the child side of MeasureAttacks: a dispatcher process
// (embedded server under dir, a native worker pool with the built-in
// tools, default limits) serving on a loopback port it prints as a READY
// line; it stops when ctx ends.
func AttackServer(ctx context.Context, dir string, stdout io.Writer, log *slog.Logger) error {
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- dispatchd.Run(ctx, dispatchd.RunConfig{DataDir: dir, HTTPAddr: "127.0.0.1:0",
			Tools: builtin.Tools(), Ready: ready, Logger: log, Grace: 5 * time.Second})
	}()
	select {
	case addr := <-ready:
		if _, err := fmt.Fprintf(stdout, "READY %s\n", addr); err != nil {
			return err
		}
	case err := <-done:
		return err
	}
	return <-done
}

// WriteAttackTable writes the results as a markdown table.
func WriteAttackTable(w io.Writer, rs []AttackResult) {
	fmt.Fprintln(w, "| attack | body | at once | answer | time to answer, median / max | dispatcher CPU per request | peak RSS growth | RSS retained after 1 s |")
	fmt.Fprintln(w, "|---|---:|---:|---|---:|---:|---:|---:|")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %s | %d | %s | %.1f / %.1f ms | %.1f ms | %.1f MiB | %.1f MiB |\n", r.Attack.Name, size(r.Attack.Size), r.Parallel, r.Attack.Want,
			ms(r.Median()), ms(r.Max()), ms(r.CPUPerRequest()), mib(r.PeakGrowth), mib(r.Retained))
	}
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", mib(n))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
