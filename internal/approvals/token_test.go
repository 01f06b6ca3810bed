package approvals_test

import (
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/policy"
)

func keyLine(id string) (line string, key []byte) {
	key = make([]byte, 32)
	_, _ = rand.Read(key)
	return id + ":" + base64.StdEncoding.EncodeToString(key), key
}

func binding() *policy.Approval {
	return &policy.Approval{ID: "01J00000000000000000000C01", Tenant: "acme", Agent: "bot", Session: "s1", Tool: "wipe", SpecVersion: "v1",
		ArgsSHA256: strings.Repeat("ab", 32), Expires: time.Now().Add(time.Hour).Truncate(time.Second), Nonce: approvals.NewNonce()}
}

// A token verifies with the key that signed it and carries its binding;
// a changed byte anywhere, another installation's key, or garbage is
// refused, never with a panic.
func TestTokensVerifyOnlyWhatWasSigned(t *testing.T) {
	t.Parallel()
	k1, _ := keyLine("k1")
	keys, err := approvals.ParseKeys([]byte("# comment\n\n" + k1 + "\n"))
	require.NoError(t, err)
	require.Equal(t, "k1", keys.SigningKeyID())
	a := binding()
	token, err := keys.Sign(a)
	require.NoError(t, err)
	got, err := keys.Verify(token)
	require.NoError(t, err)
	require.Equal(t, a.ID, got.ID)
	require.Equal(t, a.ArgsSHA256, got.ArgsSHA256)
	require.True(t, a.Expires.Equal(got.Expires))
	require.Equal(t, a.Nonce, got.Nonce)

	// Every single-character change is refused (the MAC covers all).
	for i := range len(token) {
		b := []byte(token)
		b[i] ^= 1
		_, err := keys.Verify(string(b))
		require.ErrorIs(t, err, approvals.ErrBadToken, "byte %d", i)
	}
	// A token has one spelling: a line break or a space inside it (which
	// base64 decoding would skip) is refused, wherever it is.
	for _, c := range []string{"\r", "\n", "\r\n", " ", "="} {
		for _, i := range []int{len(token) - 3, len(token) / 2, len("tw1.k1.") + 2} {
			_, err := keys.Verify(token[:i] + c + token[i:])
			require.ErrorIs(t, err, approvals.ErrBadToken, "%q at %d", c, i)
		}
	}
	// The same binding signed by another installation's key named k1.
	other, _ := keyLine("k1")
	otherKeys, err := approvals.ParseKeys([]byte(other))
	require.NoError(t, err)
	forged, err := otherKeys.Sign(a)
	require.NoError(t, err)
	_, err = keys.Verify(forged)
	require.ErrorIs(t, err, approvals.ErrBadToken)
	for _, bad := range []string{"", "tw1.", "tw1..", "tw1.k1", "tw1.k1..", "x.k1.a.b", strings.Repeat("a", 5000), "tw1.k9.e30.AAAA"} {
		_, err := keys.Verify(bad)
		require.ErrorIs(t, err, approvals.ErrBadToken, bad)
	}
	require.NotContains(t, keys.String(), strings.SplitN(k1, ":", 2)[1], "String never shows a key")
}

// A rotation in rolling steps: the new key added second (verifies, does
// not sign), then moved first (signs), then the old one removed. At every
// step a token of the step before still verifies, except after the old
// key is gone.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	oldLine, _ := keyLine("old")
	newLine, _ := keyLine("new")
	parse := func(lines ...string) *approvals.Keys {
		k, err := approvals.ParseKeys([]byte(strings.Join(lines, "\n")))
		require.NoError(t, err)
		return k
	}
	step0, step1, step2, step3 := parse(oldLine), parse(oldLine, newLine), parse(newLine, oldLine), parse(newLine)
	sign := func(k *approvals.Keys) string {
		s, err := k.Sign(binding())
		require.NoError(t, err)
		return s
	}
	t0, t1, t2 := sign(step0), sign(step1), sign(step2)
	require.True(t, strings.HasPrefix(t1, "tw1.old."), "the new key does not sign while second")
	require.True(t, strings.HasPrefix(t2, "tw1.new."))
	for _, c := range []struct {
		k     *approvals.Keys
		token string
		ok    bool
	}{{step1, t0, true}, {step2, t1, true}, {step2, t0, true}, {step1, t2, true}, {step3, t2, true}, {step3, t0, false}} {
		_, err := c.k.Verify(c.token)
		if c.ok {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, approvals.ErrBadToken)
		}
	}
}

// A key file is refused, naming the line and never the key, when it is
// readable by others, too large, empty, or has a short key, a bad id, a
// repeated id or a value that is no base64.
func TestKeyFileChecks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	good, _ := keyLine("k1")
	secret := strings.SplitN(good, ":", 2)[1]
	k, err := approvals.LoadKeys(write("good", good+"\n", 0o600))
	require.NoError(t, err)
	require.Equal(t, "k1", k.SigningKeyID())

	_, err = approvals.LoadKeys(write("open", good+"\n", 0o644))
	require.ErrorIs(t, err, approvals.ErrKeyFile)
	require.Contains(t, err.Error(), "chmod 600")
	_, err = approvals.LoadKeys(write("big", strings.Repeat("#\n", approvals.MaxKeyFileBytes), 0o600))
	require.ErrorIs(t, err, approvals.ErrKeyFile)
	_, err = approvals.LoadKeys(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, approvals.ErrKeyFile)
	_, err = approvals.LoadKeys(dir)
	require.ErrorIs(t, err, approvals.ErrKeyFile)
	for name, text := range map[string]string{
		"empty":     "# nothing\n",
		"short":     "k1:" + base64.StdEncoding.EncodeToString([]byte("short")),
		"bad id":    "k.1:" + secret,
		"no colon":  secret,
		"twice":     good + "\n" + good,
		"no base64": "k2:" + secret + "!!",
	} {
		_, err := approvals.ParseKeys([]byte(text))
		require.ErrorIs(t, err, approvals.ErrKeyFile, name)
		require.NotContains(t, err.Error(), secret, "%s: the error shows no key", name)
	}
}

func FuzzVerify(f *testing.F) {
	line, _ := keyLine("k1")
	keys, err := approvals.ParseKeys([]byte(line))
	if err != nil {
		f.Fatal(err)
	}
	token, _ := keys.Sign(binding())
	for _, s := range []string{token, "", "tw1.", "tw1.k1.x.y", "tw1.k1.e30.x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := keys.Verify(s)
		if err == nil && s != token {
			t.Fatalf("a token that was never signed verified: %q -> %+v", s, a)
		}
	})
}
