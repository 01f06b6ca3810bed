package httpexec_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/executors/httpexec"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ssrfResolver: names that resolve to refused addresses, and good.test,
// which resolves to the (allowlisted) test server.
var ssrfResolver = fakeResolver{
	"good.test":       {netip.MustParseAddr("127.0.0.1")},
	"evil.test":       {netip.MustParseAddr("127.0.0.1")},
	"mapped.test":     {netip.MustParseAddr("::ffff:127.0.0.1")},
	"private.test":    {netip.MustParseAddr("10.0.0.1")},
	"metadata.test":   {netip.MustParseAddr("169.254.169.254")},
	"zero.test":       {netip.MustParseAddr("0.0.0.0")},
	"linklocal6.test": {netip.MustParseAddr("fe80::1")},
}

// TestSSRFCorpus: every URL is refused as PERMISSION_DENIED, with no side
// effects, before any request reaches a server — while the allowlisted
// server itself works.
func TestSSRFCorpus(t *testing.T) {
	t.Parallel()

	b := setup(t, httpexec.Config{Resolver: ssrfResolver})
	port := b.srv.port
	at := func(host string) string { return fmt.Sprintf("http://%s:%d/echo", host, port) }
	redirect := func(to string) string {
		return b.srv.URL + "/redirect?to=" + url.QueryEscape(to)
	}

	// The tool may reach 127.0.0.1:port only; the rest of loopback and
	// every private range stays closed.
	loopbackOnly := func(hc *toolwirev1.HttpConfig) {
		hc.AllowNetworks = []string{"127.0.0.1/32"}
		hc.AllowPorts = []int32{port}
	}
	for _, tt := range []struct {
		name  string
		url   string
		hosts []string
		mod   func(*toolwirev1.HttpConfig)
	}{
		{name: "loopback without allow_networks", url: at("127.0.0.1")},
		{name: "decimal IP", url: at("2130706433")},
		{name: "octal IP", url: at("0177.0.0.1")},
		{name: "hex IP", url: at("0x7f.0.0.1")},
		{name: "short IP", url: at("127.1")},
		{name: "userinfo trick", url: fmt.Sprintf("http://allowed.example@127.0.0.1:%d/echo", port), hosts: []string{"127.0.0.1", "allowed.example"}},
		{name: "IPv6 loopback", url: at("[::1]")},
		{name: "IPv4-mapped IPv6 loopback", url: at("[::ffff:127.0.0.1]")},
		{name: "IPv4-mapped IPv6 hex form", url: at("[::ffff:7f00:1]")},
		{name: "this network", url: at("0.0.0.0")},
		{name: "metadata", url: "http://169.254.169.254/latest/meta-data/"},
		{name: "metadata IPv6", url: "http://[fd00:ec2::254]/latest/meta-data/"},
		{name: "private 10/8", url: "http://10.0.0.1/"},
		{name: "private 192.168/16", url: "http://192.168.1.1/"},
		{name: "private 172.16/12", url: "http://172.16.0.1/"},
		{name: "shared 100.64/10", url: "http://100.64.0.1/"},
		{name: "link-local IPv6", url: "http://[fe80::1]/"},
		{name: "name resolving to loopback", url: at("evil.test")},
		{name: "name resolving to IPv4-mapped loopback", url: at("mapped.test")},
		{name: "name resolving to private", url: "http://private.test/"},
		{name: "name resolving to metadata", url: "http://metadata.test/"},
		{name: "name resolving to 0.0.0.0", url: at("zero.test")},
		{name: "name resolving to link-local IPv6", url: "http://linklocal6.test/"},
		{name: "metadata inside an allowed network", url: "http://169.254.169.254/",
			mod: func(hc *toolwirev1.HttpConfig) { hc.AllowNetworks = []string{"169.254.0.0/16"} }},
		{name: "name resolving to metadata inside an allowed network", url: "http://metadata.test/",
			mod: func(hc *toolwirev1.HttpConfig) { hc.AllowNetworks = []string{"169.254.0.0/16"} }},
		{name: "port not allowlisted", url: at("127.0.0.1"),
			mod: func(hc *toolwirev1.HttpConfig) { hc.AllowNetworks, hc.AllowPorts = []string{"127.0.0.1/32"}, nil }},
		{name: "other loopback address", url: at("127.0.0.2"), mod: loopbackOnly},
		{name: "redirect to a host not in allow_hosts", url: redirect(at("good.test")), mod: loopbackOnly},
		{name: "redirect to loopback IPv6", url: redirect(at("[::1]")), hosts: []string{"127.0.0.1", "::1"}, mod: loopbackOnly},
		{name: "redirect to a name resolving to private", url: redirect(fmt.Sprintf("http://private.test:%d/", port)),
			hosts: []string{"127.0.0.1", "private.test"}, mod: loopbackOnly},
		{name: "redirect to a name resolving to loopback, not allowlisted", url: redirect(at("evil.test")), mod: loopbackOnly},
		{name: "redirect to metadata", url: redirect("http://169.254.169.254/"), hosts: []string{"127.0.0.1", "169.254.169.254"}, mod: loopbackOnly},
		{name: "redirect to a decimal IP", url: redirect(at("2130706433")), hosts: []string{"127.0.0.1", "2130706433"}, mod: loopbackOnly},
		{name: "redirect to another scheme", url: redirect("file:///etc/passwd"), mod: loopbackOnly},
		{name: "redirect with userinfo", url: redirect(fmt.Sprintf("http://x@127.0.0.1:%d/echo", port)), mod: loopbackOnly},
		{name: "redirect to a port not allowlisted", url: redirect("http://127.0.0.1:1/"), mod: loopbackOnly},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hc := &toolwirev1.HttpConfig{Method: http.MethodPost, UrlTemplate: tt.url, AllowHosts: tt.hosts,
				AllowPorts: []int32{80, 443, port}}
			if tt.mod != nil {
				tt.mod(hc)
			}
			spec := &toolwirev1.ToolSpec{Name: "ssrf", Config: &toolwirev1.ToolSpec_Http{Http: hc}}
			res, err := call(t, b.exec, spec, `{}`)
			require.Nil(t, res)
			te := toolErr(t, err)
			require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, te.Type, "%v", err)
			require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, te.SideEffects)
			require.False(t, te.Retryable)
			require.Contains(t, te.Message, "refused")
		})
	}

	t.Run("the allowlisted server works, by address and by name", func(t *testing.T) {
		for _, u := range []string{at("127.0.0.1") + "?text=hi", at("good.test") + "?text=hi"} {
			hc := &toolwirev1.HttpConfig{UrlTemplate: u}
			loopbackOnly(hc)
			res, err := call(t, b.exec, &toolwirev1.ToolSpec{Name: "ok", Config: &toolwirev1.ToolSpec_Http{Http: hc}}, `{}`)
			require.NoError(t, err)
			require.Equal(t, "hi", text(t, res))
		}
		hc := &toolwirev1.HttpConfig{UrlTemplate: redirect(at("127.0.0.1") + "?text=followed")}
		loopbackOnly(hc)
		res, err := call(t, b.exec, &toolwirev1.ToolSpec{Name: "ok", Config: &toolwirev1.ToolSpec_Http{Http: hc}}, `{}`)
		require.NoError(t, err)
		require.Equal(t, "followed", text(t, res), "an allowed redirect is followed")
	})
}

// TestSSRFNothingReachesTheServer: the refused requests above that name
// the test server's own address never arrive.
func TestSSRFNothingReachesTheServer(t *testing.T) {
	t.Parallel()

	b := setup(t, httpexec.Config{Resolver: ssrfResolver})
	port := b.srv.port
	for _, u := range []string{
		fmt.Sprintf("http://127.0.0.1:%d/echo", port),
		fmt.Sprintf("http://2130706433:%d/echo", port),
		fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/echo", port),
		fmt.Sprintf("http://evil.test:%d/echo", port),
		fmt.Sprintf("http://mapped.test:%d/echo", port),
	} {
		hc := &toolwirev1.HttpConfig{Method: http.MethodPost, UrlTemplate: u, AllowPorts: []int32{port}}
		_, err := call(t, b.exec, &toolwirev1.ToolSpec{Name: "ssrf", Config: &toolwirev1.ToolSpec_Http{Http: hc}}, `{}`)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, toolErr(t, err).Type, u)
	}
	require.Zero(t, b.srv.hits.Load())
}

// TestRedirects: a loop is bounded, and MaxRedirects -1 answers the 3xx.
func TestRedirects(t *testing.T) {
	t.Parallel()

	b := setup(t, httpexec.Config{MaxRedirects: 3})
	_, err := call(t, b.exec, b.srv.spec("loop", http.MethodGet, "/loop", nil, nil), `{}`)
	te := toolErr(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, te.Type)
	require.Contains(t, te.Message, "too many redirects")

	none := setup(t, httpexec.Config{MaxRedirects: -1})
	_, err = call(t, none.exec, none.srv.spec("loop", http.MethodGet, "/loop", nil, nil), `{}`)
	te = toolErr(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, te.Type)
	require.Contains(t, te.Message, "302")
}

// rebindResolver answers 127.0.0.1 (allowed) first, then 10.0.0.1.
type rebindResolver struct{ n atomic.Int64 }

func (r *rebindResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	if r.n.Add(1) == 1 {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("10.0.0.1")}, nil
}

// TestDNSRebinding: a name is resolved and checked at every dial, so a
// name that re-resolves to a refused address is refused, although the
// same URL passed before.
func TestDNSRebinding(t *testing.T) {
	t.Parallel()

	r := &rebindResolver{}
	b := setup(t, httpexec.Config{Resolver: r})
	hc := &toolwirev1.HttpConfig{UrlTemplate: fmt.Sprintf("http://rebind.test:%d/echo?text=first", b.srv.port),
		AllowNetworks: []string{"127.0.0.1/32"}, AllowPorts: []int32{b.srv.port}}
	spec := &toolwirev1.ToolSpec{Name: "rebind", Config: &toolwirev1.ToolSpec_Http{Http: hc}}
	res, err := call(t, b.exec, spec, `{}`)
	require.NoError(t, err)
	require.Equal(t, "first", text(t, res))

	require.NoError(t, b.exec.Close(t.Context())) // the next call dials again (the executor stays usable)
	_, err = call(t, b.exec, spec, `{}`)
	te := toolErr(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, te.Type, "%v", err)
	require.Contains(t, te.Message, "10.0.0.1")
	require.Equal(t, int64(1), b.srv.hits.Load())
}
