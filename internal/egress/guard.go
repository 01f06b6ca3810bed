package egress

import (
	"fmt"
	"net/netip"
	"slices"

	"code.dny.dev/ssrf"
)

// MetadataAddrs are cloud instance-metadata endpoints. They are refused
// even inside an allowed network unless that network is the one address.
var MetadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack
	netip.MustParseAddr("169.254.170.2"),   // AWS ECS task credentials
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
}

// Guard judges destination addresses (see the package documentation). It
// is safe for concurrent use.
type Guard struct {
	networks []netip.Prefix
	ssrf     *ssrf.Guardian
}

// New returns a Guard that allows the public internet on ports, and the
// addresses of networks (parsed by ParseNetwork) on ports although not
// public. ports must not be empty: a Guard without ports refuses
// everything.
func New(ports []uint16, networks []netip.Prefix) *Guard {
	var v4, v6 []netip.Prefix
	for _, n := range networks {
		if n.Addr().Is4() {
			v4 = append(v4, n)
		} else {
			v6 = append(v6, n)
		}
	}
	if len(ports) == 0 {
		ports = []uint16{0} // ssrf reads no ports as "the defaults"; 0 is never dialled
	}
	return &Guard{
		networks: slices.Clone(networks),
		ssrf:     ssrf.New(ssrf.WithPorts(ports...), ssrf.WithAllowedV4Prefixes(v4...), ssrf.WithAllowedV6Prefixes(v6...)),
	}
}

// Check returns nil when ap may be reached, and an error wrapping
// ssrf.ErrProhibitedIP or ssrf.ErrProhibitedPort when it may not.
func (g *Guard) Check(ap netip.AddrPort) error {
	addr := ap.Addr().Unmap()
	if slices.Contains(MetadataAddrs, addr) && !slices.Contains(g.networks, netip.PrefixFrom(addr, addr.BitLen())) {
		return fmt.Errorf("%w: %s is a cloud metadata address", ssrf.ErrProhibitedIP, addr)
	}
	return g.ssrf.SafeAddrPort(netip.AddrPortFrom(addr, ap.Port()))
}

// ParseNetwork parses a CIDR of an allow list ("10.1.0.0/16",
// "192.0.2.7/32", "fd12::/48"); an IPv4-mapped IPv6 prefix is refused
// (write the IPv4 prefix). The result is masked.
func ParseNetwork(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR: %w", s, err)
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%q: write IPv4-mapped networks in IPv4 form", s)
	}
	return p.Masked(), nil
}
