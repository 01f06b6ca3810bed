// Package cliflag gives every toolwire binary the same flag conventions:
// each flag can also be set by an environment variable (prefix plus the
// flag name in upper snake case, e.g. --nats-url ← TOOLWIRE_NATS_URL;
// command-line flags win), and one log/slog set-up (text, at the level of
// --log-level). Positional arguments are refused; Setup tells a main to
// exit 0 after -help and 2 on bad flags.
package cliflag
