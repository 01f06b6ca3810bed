// Package egress is the address guard of toolwire's outbound connections:
// one rule, used by the HTTP executor at dial time (after name resolution,
// so DNS rebinding is refused too) and by the sandbox's supervisor for the
// connect(2), sendto(2) and sendmsg(2) calls of tools with network access.
//
// # The rule
//
// Guard.Check refuses an address in any range that is not public
// internet — loopback, private (10/8, 172.16/12, 192.168/16), link-local,
// unique-local, shared (100.64/10), "this network", reserved,
// documentation, benchmarking, multicast, broadcast, NAT64, IPv4-mapped
// and the other IPv6 transition forms (the code.dny.dev/ssrf deny lists)
// — unless it lies in one of the Guard's allowed networks; and a port the
// Guard does not list. IPv4-mapped IPv6 addresses are checked as the IPv4
// address they carry. Cloud instance-metadata addresses (MetadataAddrs:
// 169.254.169.254, 169.254.170.2, 100.100.100.200, fd00:ec2::254) are
// refused even inside an allowed network unless that network is the one
// address (a /32 or /128): allowing 169.254.0.0/16 must not expose
// instance credentials.
//
// A refusal wraps ssrf.ErrProhibitedIP or ssrf.ErrProhibitedPort.
//
// The package holds no I/O: it judges addresses. Where the address comes
// from — a net.Dialer's Control, or a sandboxed process's memory — and
// what that cannot see is the caller's documentation.
package egress
