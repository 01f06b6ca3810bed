package toolctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/spf13/cobra"

	"github.com/toolwire/toolwire/internal/bus"
)

// natsContext is the part of a nats CLI context file toolctl writes: the
// server, the operator's credentials and the inbox prefix the operator's
// connections must use (its permissions allow replies on that prefix
// only: with --nkey alone every request of the CLI timed out).
type natsContext struct {
	Description string `json:"description"`
	URL         string `json:"url"`
	NKey        string `json:"nkey,omitempty"`
	Creds       string `json:"creds,omitempty"`
	InboxPrefix string `json:"inbox_prefix"`
}

// contextNameRe is what a context's name may be: it becomes a file name.
var contextNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

func (a *app) natsContextCommand() *cobra.Command {
	var name, dir string
	cmd := &cobra.Command{
		Use:   "nats-context",
		Short: "Write a nats CLI context for this installation's operator credentials",
		Long: `Write a context file for the nats CLI (its "contexts": a JSON file per
context under $XDG_CONFIG_HOME/nats/context, default ~/.config/nats/context)
with the server (--nats-url), the operator credentials (--nats-creds, or on
a loopback URL <data>/credentials/operator.nk) and the inbox prefix the
operator's NATS permissions allow replies on, so that the nats CLI works as
written: nats --context toolwire stream ls. It connects to nothing; it
writes the file (mode 0600) and says where.`,
		Example: `  toolctl nats-context
  nats --context toolwire stream ls
  toolctl nats-context --name prod --nats-url nats://nats.example:4222 --nats-creds ./operator.nk`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.resolveNATS(cmd); err != nil {
				return err
			}
			if !contextNameRe.MatchString(name) {
				return fmt.Errorf("--name %q: letters, digits, '_', '.' and '-', at most 64", name)
			}
			if dir == "" {
				d, err := defaultContextDir(a)
				if err != nil {
					return err
				}
				dir = d
			}
			return a.writeNATSContext(dir, name)
		},
	}
	a.natsFlags(cmd)
	cmd.Flags().StringVar(&name, "name", "toolwire", "the context's name")
	cmd.Flags().StringVar(&dir, "dir", "", "where the nats CLI keeps its contexts (default $XDG_CONFIG_HOME/nats/context or ~/.config/nats/context)")
	return cmd
}

// defaultContextDir is where the nats CLI reads its contexts.
func defaultContextDir(a *app) (string, error) {
	if x, ok := a.io.LookupEnv("XDG_CONFIG_HOME"); ok && x != "" {
		return filepath.Join(x, "nats", "context"), nil
	}
	if h, ok := a.io.LookupEnv("HOME"); ok && h != "" {
		return filepath.Join(h, ".config", "nats", "context"), nil
	}
	return "", errors.New("neither XDG_CONFIG_HOME nor HOME is set: give --dir")
}

// writeNATSContext writes the context file name in dir.
func (a *app) writeNATSContext(dir, name string) error {
	c := natsContext{Description: "toolwire operator (" + a.nats.prefix + "), written by toolctl nats-context",
		URL: a.nats.url, InboxPrefix: bus.InboxPrefix(bus.Config{Prefix: a.nats.prefix}, bus.RoleOperator)}
	if a.nats.creds == "" {
		return errors.New("no credentials: give --nats-creds (on the dispatcher's machine, with a loopback --nats-url, <data>/credentials/operator.nk is found by itself)")
	}
	creds, err := filepath.Abs(a.nats.creds)
	if err != nil {
		return fmt.Errorf("--nats-creds: %w", err)
	}
	kind, err := bus.CredentialsKind(creds)
	if err != nil {
		return fmt.Errorf("--nats-creds: %w", err)
	}
	switch kind {
	case bus.CredsJWT:
		c.Creds = creds
	case bus.CredsNKey:
		c.NKey = creds // toolwire's own credentials are nkey seeds
	default:
		// The nats CLI would need the password in the context file: not
		// copied out of the file the operator keeps it in.
		return errors.New("--nats-creds holds a user and password: give them to the nats CLI yourself (--user, --password); a context is written for nkey and JWT credentials only")
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("context directory: %w", err)
	}
	path := filepath.Join(dir, name+".json")
	if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("context file: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil { // a file that was there keeps its mode otherwise
		return fmt.Errorf("context file: %w", err)
	}
	fmt.Fprintf(a.io.Stdout, "wrote %s\nuse it: nats --context %s stream ls (or select it: nats context select %s)\n", path, name, name)
	return nil
}
