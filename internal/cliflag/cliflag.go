package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// Parse applies environment variables, then parses args.
func Parse(fs *flag.FlagSet, args []string, envPrefix string) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := envPrefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", name, e)
			}
		}
	})
	if err != nil {
		fmt.Fprintln(fs.Output(), err)
		return err
	}
	return fs.Parse(args)
}

// Logger returns a text slog.Logger at level ("debug", "info", "warn",
// "error") writing to w.
func Logger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("bad log level %q: %w", level, err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// Setup is the common start of a main: it parses args (environment first,
// see Parse), refuses positional arguments, and builds the logger at
// *logLevel. When ok is false the process should exit with code: 0 after
// -help, 2 for bad flags (already reported on fs's output).
func Setup(fs *flag.FlagSet, args []string, envPrefix string, logLevel *string) (log *slog.Logger, code int, ok bool) {
	if err := Parse(fs, args, envPrefix); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, 0, false
		}
		return nil, 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return nil, 2, false
	}
	log, err := Logger(fs.Output(), *logLevel)
	if err != nil {
		fmt.Fprintln(fs.Output(), err)
		return nil, 2, false
	}
	return log, 0, true
}
