package toolctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/toolwire/toolwire/internal/dlq"
	"github.com/toolwire/toolwire/pkg/client"
)

// Exit codes of toolctl.
const (
	// ExitOK: the call succeeded, or the command did what it was asked.
	ExitOK = 0
	// ExitToolError: the fabric answered with an error — the tool failed,
	// the call was refused at admission (validation, unknown tool,
	// permissions), or the tool, call id or dead letter named does not
	// exist (or cannot be retried).
	ExitToolError = 1
	// ExitUsage: bad flags or arguments (including arguments that are not
	// JSON), or no answer at all: the dispatcher or NATS is unreachable,
	// refused the credentials, or --timeout passed.
	ExitUsage = 2
	// ExitPending: the call is accepted but has no result yet — it runs,
	// or it waits for an approver — and its id is printed so `toolctl get`
	// can fetch the result later.
	ExitPending = 3
)

// DefaultServer is the dispatcher address used when neither --server nor
// TOOLWIRE_SERVER is set: the address a dispatcher with no configuration
// serves on.
const DefaultServer = "http://127.0.0.1:8080"

// DefaultNATSURL is the NATS address of the dlq commands when neither
// --nats-url nor TOOLWIRE_NATS_URL is set.
const DefaultNATSURL = "nats://127.0.0.1:4222"

// IO is what a toolctl run reads and writes.
type IO struct {
	// Stdin is read by `call -` and `submit -`.
	Stdin io.Reader
	// Stdout receives results: tool output, call ids, JSON.
	Stdout io.Writer
	// Stderr receives tool errors, notes and failures.
	Stderr io.Writer
	// LookupEnv reads TOOLWIRE_SERVER and TOOLWIRE_API_KEY, and for the
	// NATS commands (dlq, audit, replay) TOOLWIRE_NATS_URL,
	// TOOLWIRE_NATS_CREDS, TOOLWIRE_PREFIX and TOOLWIRE_DATA; nil reads no
	// environment.
	LookupEnv func(key string) (string, bool)
}

// Main runs toolctl with the command-line arguments args (without the
// program name) and the process's stdin and environment, until it is done
// or interrupted (SIGINT, SIGTERM), and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, args, IO{Stdin: os.Stdin, Stdout: stdout, Stderr: stderr, LookupEnv: os.LookupEnv})
}

// Run runs toolctl with args (without the program name) and returns the
// exit code: ExitOK, ExitToolError, ExitUsage or ExitPending.
func Run(ctx context.Context, args []string, stdio IO) int {
	if args == nil {
		args = []string{} // cobra reads os.Args when given nil
	}
	if stdio.Stdin == nil {
		stdio.Stdin = eofReader{}
	}
	if stdio.LookupEnv == nil {
		stdio.LookupEnv = func(string) (string, bool) { return "", false }
	}
	a := &app{io: stdio}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(stdio.Stdin)
	root.SetOut(stdio.Stdout)
	root.SetErr(stdio.Stderr)
	defer a.close()

	cmd, err := root.ExecuteContextC(ctx)
	var code exitCode
	var failed *requestError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &failed) && answered(failed.err):
		// The dispatcher answered, with a refusal: like a tool error.
		fmt.Fprintf(stdio.Stderr, "error: %v\n", failed.err)
		if hint := a.hint(failed.err); hint != "" {
			fmt.Fprintln(stdio.Stderr, hint)
		}
		return ExitToolError
	case errors.As(err, &failed):
		fmt.Fprintf(stdio.Stderr, "toolctl: %v\n", failed.err)
		if hint := a.hint(failed.err); hint != "" {
			fmt.Fprintln(stdio.Stderr, hint)
		}
		return ExitUsage
	}
	fmt.Fprintf(stdio.Stderr, "toolctl: %v\nRun '%s --help' for usage.\n", err, cmd.CommandPath())
	return ExitUsage
}

// answered reports whether err is the dispatcher's answer to the request
// (an unknown id, a refusal) rather than no answer at all (unreachable,
// bad credentials, a timeout): the first exits ExitToolError, the second
// ExitUsage, the same for every command.
func answered(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeNotFound, connect.CodeInvalidArgument, connect.CodeFailedPrecondition,
		connect.CodePermissionDenied, connect.CodeAlreadyExists, connect.CodeResourceExhausted,
		connect.CodeOutOfRange, connect.CodeAborted:
		return true
	}
	return false
}

// exitCode ends a command whose outcome is already printed.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// requestError is a request that got no answer (transport, credentials,
// timeout), as opposed to a usage error.
type requestError struct{ err error }

func (e *requestError) Error() string { return e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

// app holds the global flags and the client or NATS connection built
// from them.
type app struct {
	io      IO
	server  string
	apiKey  string
	output  string
	timeout time.Duration
	nats    natsFlags
	// archive is --archive of audit and replay (archive.go).
	archive string

	transport *http.Transport
	client    *client.Client
	nc        *nats.Conn
	queue     *dlq.Queue
	cancel    context.CancelFunc
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "toolctl",
		Short: "Call tools and inspect the registry of a toolwire dispatcher",
		Long: `toolctl calls, watches and cancels tools and inspects the tool registry
through a toolwire dispatcher's API; 'toolctl dlq' reads and retries dead
letters through NATS.

Exit status: 0 when the call succeeded (or the command did what it was
asked), 1 when the fabric answered with an error (the tool failed, the call
was refused, the tool, call or dead letter is unknown), 2 for usage errors
and requests that got no answer (unreachable server, bad API key,
--timeout), 3 when the call has no result yet (its id is printed; fetch it
with 'toolctl get'), also when it waits for an approver ('toolctl approvals').`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: a.setup,
	}
	f := root.PersistentFlags()
	f.StringVar(&a.server, "server", DefaultServer, "dispatcher API base URL (env TOOLWIRE_SERVER)")
	f.StringVar(&a.apiKey, "api-key", "", "API key sent as a bearer token (env TOOLWIRE_API_KEY)")
	f.StringVarP(&a.output, "output", "o", "text", "output format: text or json")
	f.DurationVar(&a.timeout, "timeout", 0, "give up after this long (0 = no limit; a call's wait ends shortly before it)")
	root.AddCommand(a.callCommand(), a.submitCommand(), a.getCommand(), a.watchCommand(), a.cancelCommand(),
		a.toolsCommand(), a.dlqCommand(), a.sessionCommand(), a.auditCommand(), a.replayCommand(), a.outputCommand(),
		a.policyCommand(), a.approvalsCommand(), a.grantsCommand(), a.usageCommand(), a.mcpCommand(), a.storeCommand(), a.natsContextCommand(),
		a.poolCommand())
	return root
}

// setup resolves the global flags against the environment and builds the
// client. Flags given on the command line win over the environment.
func (a *app) setup(cmd *cobra.Command, _ []string) error {
	if err := a.setupCommon(cmd); err != nil {
		return err
	}
	flags := cmd.Flags()
	if v, ok := a.io.LookupEnv("TOOLWIRE_SERVER"); ok && v != "" && !flags.Changed("server") {
		a.server = v
	}
	if v, ok := a.io.LookupEnv("TOOLWIRE_API_KEY"); ok && !flags.Changed("api-key") {
		a.apiKey = v
	}
	a.transport = http.DefaultTransport.(*http.Transport).Clone()
	opts := []client.Option{client.WithHTTPClient(&http.Client{Transport: a.transport})}
	if a.apiKey != "" {
		opts = append(opts, client.WithAPIKey(a.apiKey))
	}
	c, err := client.New(a.server, opts...)
	if err != nil {
		return fmt.Errorf("--server: %w", err)
	}
	a.client = c
	return nil
}

// setupCommon checks the flags every command shares and applies
// --timeout to the command's context.
func (a *app) setupCommon(cmd *cobra.Command) error {
	if a.output != "text" && a.output != "json" {
		return fmt.Errorf("--output %q: want text or json", a.output)
	}
	if a.timeout < 0 {
		return fmt.Errorf("--timeout %s: must not be negative", a.timeout)
	}
	if a.timeout > 0 {
		ctx, cancel := context.WithTimeout(cmd.Context(), a.timeout)
		a.cancel = cancel
		cmd.SetContext(ctx)
	}
	return nil
}

func (a *app) close() {
	if a.cancel != nil {
		a.cancel()
	}
	if a.transport != nil {
		a.transport.CloseIdleConnections()
	}
	if a.nc != nil {
		a.nc.Close()
	}
}

// hint suggests a fix for a request that got no answer.
func (a *app) hint(err error) string {
	switch {
	case errors.Is(err, nats.ErrNoServers):
		// The URL is in the error, with any password redacted.
		return "Is NATS serving there? Set --nats-url or TOOLWIRE_NATS_URL."
	case errors.Is(err, dlq.ErrNoInstallation):
		return "Set --prefix or TOOLWIRE_PREFIX to the installation's prefix."
	case errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked):
		if a.nats.creds == "" {
			return "NATS wants credentials: set --nats-creds or TOOLWIRE_NATS_CREDS, or, on the dispatcher's machine with a loopback --nats-url, --data or TOOLWIRE_DATA to its data directory (toolctl then uses <data>/credentials/operator.nk)."
		}
		return fmt.Sprintf("NATS refused the credentials in %s.", a.nats.creds)
	case errors.Is(err, dlq.ErrNoDispatcher):
		return "Start a dispatcher of the installation (it serves 'dlq retry'), or set --prefix to its prefix."
	case errors.Is(err, context.DeadlineExceeded) && a.nc != nil && a.timeout > 0:
		return fmt.Sprintf("No answer within --timeout %s.", a.timeout)
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable:
		return fmt.Sprintf("Is a dispatcher serving at %s? Set --server or TOOLWIRE_SERVER.", a.server)
	case connect.CodeUnauthenticated:
		return "Set --api-key or TOOLWIRE_API_KEY to a key the dispatcher accepts."
	case connect.CodeDeadlineExceeded:
		if a.timeout > 0 {
			return fmt.Sprintf("No answer within --timeout %s.", a.timeout)
		}
	}
	return ""
}

func (a *app) json() bool { return a.output == "json" }

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
