package egress_test

import (
	"net/netip"
	"testing"

	"code.dny.dev/ssrf"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/egress"
)

func TestGuard(t *testing.T) {
	t.Parallel()
	allowed := []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("169.254.0.0/16")}
	g := egress.New([]uint16{80, 443}, allowed)
	for addr, want := range map[string]error{
		"93.184.215.14:443":     nil,
		"10.1.2.3:80":           nil, // listed
		"10.2.0.1:80":           ssrf.ErrProhibitedIP,
		"127.0.0.1:80":          ssrf.ErrProhibitedIP,
		"[::ffff:127.0.0.1]:80": ssrf.ErrProhibitedIP,
		"169.254.169.254:80":    ssrf.ErrProhibitedIP, // metadata: inside an allowed /16, not listed alone
		"169.254.1.1:80":        nil,
		"93.184.215.14:22":      ssrf.ErrProhibitedPort,
	} {
		err := g.Check(netip.MustParseAddrPort(addr))
		if want == nil {
			require.NoError(t, err, addr)
		} else {
			require.ErrorIs(t, err, want, addr)
		}
	}
	meta := egress.New([]uint16{80}, []netip.Prefix{netip.MustParsePrefix("169.254.169.254/32")})
	require.NoError(t, meta.Check(netip.MustParseAddrPort("169.254.169.254:80")), "listed as the single address")
	require.Error(t, egress.New(nil, nil).Check(netip.MustParseAddrPort("93.184.215.14:443")), "no ports: nothing")
	_, err := egress.ParseNetwork("::ffff:10.0.0.0/104")
	require.Error(t, err)
}
