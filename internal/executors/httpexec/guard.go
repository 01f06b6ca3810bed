package httpexec

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"

	"github.com/toolwire/toolwire/internal/egress"
)

// errDenied marks a request refused by the SSRF guard or an allowlist
// before anything was sent; it is answered as PERMISSION_DENIED.
var errDenied = errors.New("refused by the SSRF guard")

// policy is what the dial-time guard lets through for one tool: its ports
// and the networks allowed although not public. Tools with equal policies
// share a transport (and so its connections); tools with different ones
// never do, so a connection opened under one policy is not reused under a
// stricter one.
type policy struct {
	ports    []uint16
	networks []netip.Prefix
	key      string
	guard    *egress.Guard
}

// defaultPorts are the ports of a tool that lists none.
var defaultPorts = []int32{80, 443}

func newPolicy(toolPorts []int32, toolNetworks []string, cfg *Config) (*policy, error) {
	ports := make([]uint16, 0, len(toolPorts)+len(cfg.AllowPorts)+2)
	if len(toolPorts) == 0 {
		toolPorts = defaultPorts
	}
	for _, p := range toolPorts {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("allow_ports: %d is not a port", p)
		}
		ports = append(ports, uint16(p))
	}
	for _, p := range cfg.AllowPorts {
		ports = append(ports, uint16(p))
	}
	slices.Sort(ports)
	ports = slices.Compact(ports)

	var nets []netip.Prefix
	for _, list := range [][]string{toolNetworks, cfg.AllowNetworks} {
		for _, n := range list {
			p, err := parseNetwork(n)
			if err != nil {
				return nil, fmt.Errorf("allow_networks: %w", err)
			}
			nets = append(nets, p)
		}
	}
	slices.SortFunc(nets, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	nets = slices.Compact(nets)

	var key strings.Builder
	for _, p := range ports {
		key.WriteString(strconv.Itoa(int(p)))
		key.WriteByte(',')
	}
	key.WriteByte('|')
	for _, n := range nets {
		key.WriteString(n.String())
		key.WriteByte(',')
	}
	p := &policy{ports: ports, networks: nets, key: key.String()}
	p.guard = p.newGuard()
	return p, nil
}

// parseNetwork parses a CIDR of allow_networks (egress.ParseNetwork).
func parseNetwork(s string) (netip.Prefix, error) { return egress.ParseNetwork(s) }

func (p *policy) allowsPort(port uint16) bool { return slices.Contains(p.ports, port) }

// newGuard is the address guard of p (package egress: the same rule as
// the sandbox's for tools with network access).
func (p *policy) newGuard() *egress.Guard { return egress.New(p.ports, p.networks) }

// dialError marks a failure to connect: nothing of the request was sent.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// dialFunc returns the transport's DialContext for p: it resolves the host
// with r and dials each address in turn through a net.Dialer whose
// Control applies the guard to the address actually dialled, so a name
// that resolves (or re-resolves, DNS rebinding) to a refused address is
// refused whatever the URL said.
func (p *policy) dialFunc(r Resolver, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	g := p.guard
	d := &net.Dialer{
		Timeout:   timeout,
		KeepAlive: 30 * time.Second,
		Control: func(network, address string, _ syscall.RawConn) error {
			if network != "tcp4" && network != "tcp6" {
				return fmt.Errorf("%w: network %s", ssrf.ErrProhibitedNetwork, network)
			}
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %s", ssrf.ErrInvalidHostPort, address)
			}
			return g.Check(ap)
		},
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, &dialError{err}
		}
		var ips []netip.Addr
		if ip, err := netip.ParseAddr(host); err == nil {
			ips = []netip.Addr{ip}
		} else if ips, err = r.LookupNetIP(ctx, "ip", host); err != nil {
			return nil, &dialError{fmt.Errorf("resolving %s: %w", host, err)}
		}
		var errs []error
		for _, ip := range ips {
			conn, err := d.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
			if err == nil {
				return conn, nil
			}
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
		if len(errs) == 0 {
			errs = append(errs, fmt.Errorf("%s has no addresses", host))
		}
		return nil, &dialError{errors.Join(errs...)}
	}
}

// isGuardError reports whether err is a refusal of the ssrf guard.
func isGuardError(err error) bool {
	return errors.Is(err, errDenied) || errors.Is(err, ssrf.ErrProhibitedIP) || errors.Is(err, ssrf.ErrProhibitedPort) ||
		errors.Is(err, ssrf.ErrProhibitedNetwork) || errors.Is(err, ssrf.ErrInvalidHostPort)
}

// hostList is a tool's allow_hosts: exact names and "*.suffix" patterns.
// An empty list allows the url_template's host only.
type hostList struct {
	exact    []string
	suffixes []string // ".example.com" for "*.example.com"
}

func parseHosts(list []string, templateHost string) (hostList, error) {
	var h hostList
	if len(list) == 0 {
		h.exact = []string{normalizeHost(templateHost)}
		return h, nil
	}
	for _, s := range list {
		n := normalizeHost(s)
		if rest, ok := strings.CutPrefix(n, "*."); ok {
			if rest == "" || strings.ContainsAny(rest, "*/:@[] ") {
				return h, fmt.Errorf("allow_hosts: %q is not a host or *.domain pattern", s)
			}
			h.suffixes = append(h.suffixes, "."+rest)
			continue
		}
		if n == "" || strings.ContainsAny(n, "*/@[] ") {
			return h, fmt.Errorf("allow_hosts: %q is not a host or *.domain pattern", s)
		}
		if strings.Contains(n, ":") {
			if _, err := netip.ParseAddr(n); err != nil {
				return h, fmt.Errorf("allow_hosts: %q is not a host (no ports here: use allow_ports)", s)
			}
		}
		h.exact = append(h.exact, n)
	}
	if !h.allows(normalizeHost(templateHost)) {
		return h, fmt.Errorf("allow_hosts does not include the url_template's host %q", templateHost)
	}
	return h, nil
}

func normalizeHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

func (h hostList) allows(host string) bool {
	if slices.Contains(h.exact, host) {
		return true
	}
	for _, s := range h.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// checkTarget refuses, before anything is dialled, a URL the tool may not
// reach: a scheme other than http and https, user information, a host
// outside allow_hosts, a host written as a number in a form other than the
// dotted-quad or IPv6 one (2130706433, 0177.0.0.1, 0x7f.0.0.1, 127.1: some
// resolvers read them as addresses), an IP literal the guard refuses, or a
// port outside the policy. Names are checked again, after resolution, at
// dial time.
func checkTarget(u *url.URL, hosts hostList, p *policy, g *egress.Guard) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%w: scheme %q (only http and https)", errDenied, u.Scheme)
	}
	if u.User != nil {
		return fmt.Errorf("%w: URLs with user information (user@host) are refused", errDenied)
	}
	host := normalizeHost(u.Hostname())
	if host == "" {
		return fmt.Errorf("%w: no host", errDenied)
	}
	port := u.Port()
	switch {
	case port != "":
	case u.Scheme == "http":
		port = "80"
	default:
		port = "443"
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return fmt.Errorf("%w: port %q", errDenied, port)
	}
	if !p.allowsPort(uint16(n)) {
		return fmt.Errorf("%w: port %d is not allowed (allow_ports)", errDenied, n)
	}
	ip, ipErr := netip.ParseAddr(host)
	if ipErr != nil && looksNumeric(host) {
		return fmt.Errorf("%w: host %q is a number but not a canonical IP address", errDenied, host)
	}
	if ipErr == nil && ip.Zone() != "" {
		return fmt.Errorf("%w: IPv6 zones are refused", errDenied)
	}
	if !hosts.allows(host) {
		return fmt.Errorf("%w: host %q is not in allow_hosts", errDenied, host)
	}
	if ipErr == nil {
		if err := g.Check(netip.AddrPortFrom(ip, uint16(n))); err != nil {
			return fmt.Errorf("%w: %w", errDenied, err)
		}
	}
	return nil
}

// looksNumeric reports whether a host's last label is a number (decimal,
// octal or 0x hex), which the WHATWG URL standard and inet_aton read as an
// IPv4 address.
func looksNumeric(host string) bool {
	if strings.Contains(host, ":") {
		return true // only IPv6 literals have colons
	}
	labels := strings.Split(host, ".")
	last := labels[len(labels)-1]
	if last == "" {
		return false
	}
	if h, ok := strings.CutPrefix(last, "0x"); ok {
		for _, c := range h {
			if !strings.ContainsRune("0123456789abcdef", c) {
				return false
			}
		}
		return true
	}
	for _, c := range last {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
