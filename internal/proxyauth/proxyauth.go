// Package proxyauth holds the per-run credentials that both of hermetic's
// proxies require, so that other local processes cannot use a run's proxies:
// the HTTP proxy checks them as Basic Proxy-Authorization, the SOCKS5 proxy
// as RFC 1929 username/password. It lives here because the proxies and the
// launcher (which generates them and puts them in the injected URLs) all
// need the one definition.
package proxyauth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Credentials are a user name and password. The zero value means no
// authentication: a proxy given it serves any local client, as before.
type Credentials struct {
	User     string
	Password string
}

// Lengths of generated credentials. The alphabet has 62 letters, so the
// password carries about 190 bits: far beyond guessing over loopback.
const (
	userLen     = 12
	passwordLen = 32
	alphabet    = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
)

// Generate returns fresh random credentials from crypto/rand. Both parts
// are ASCII letters and digits only, so they can be put in a URL's userinfo,
// a shell word, a git config value or an ssh ProxyCommand without escaping.
func Generate() (Credentials, error) {
	u, err := randomString(userLen)
	if err != nil {
		return Credentials{}, err
	}
	p, err := randomString(passwordLen)
	if err != nil {
		return Credentials{}, err
	}
	return Credentials{User: "h" + u, Password: p}, nil
}

func randomString(n int) (string, error) {
	var b strings.Builder
	b.Grow(n)
	buf := make([]byte, 64)
	// Rejection sampling keeps every letter equally likely; 248 = 4*62.
	// Each byte is kept with probability 248/256, so two rounds almost
	// always suffice; the bound only stops a broken random source.
	for range 64 {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("proxyauth: reading random bytes: %w", err)
		}
		for _, c := range buf {
			if c >= 248 {
				continue
			}
			b.WriteByte(alphabet[int(c)%len(alphabet)])
			if b.Len() == n {
				return b.String(), nil
			}
		}
	}
	return "", errors.New("proxyauth: random source keeps returning out-of-range bytes")
}

// Enabled reports whether c asks for authentication.
func (c Credentials) Enabled() bool { return c.User != "" || c.Password != "" }

// Validate checks that c can be used by both proxies: empty, or a user and a
// password of 1 to 255 bytes (RFC 1929's limit), with no ':' in the user
// (Basic authentication splits at the first one) and no control bytes.
func (c Credentials) Validate() error {
	if !c.Enabled() {
		return nil
	}
	check := func(what, s string) error {
		switch {
		case s == "":
			return fmt.Errorf("proxy credentials: the %s is empty; give both user and password, or neither", what)
		case len(s) > 255:
			return fmt.Errorf("proxy credentials: the %s is %d bytes; SOCKS5 (RFC 1929) allows at most 255", what, len(s))
		}
		for i := 0; i < len(s); i++ {
			if s[i] < 0x20 || s[i] == 0x7f {
				return fmt.Errorf("proxy credentials: the %s holds a control byte", what)
			}
		}
		return nil
	}
	if err := check("user", c.User); err != nil {
		return err
	}
	if strings.Contains(c.User, ":") {
		return errors.New("proxy credentials: the user holds ':', which Basic authentication cannot carry")
	}
	return check("password", c.Password)
}

// Match reports whether user and password are c's, in time that does not
// depend on where they differ. With c empty, nothing matches.
func (c Credentials) Match(user, password string) bool {
	if !c.Enabled() {
		return false
	}
	// Digests first: ConstantTimeCompare returns early on a length
	// mismatch, and the digests have one length.
	gu, wu := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(c.User))
	gp, wp := sha256.Sum256([]byte(password)), sha256.Sum256([]byte(c.Password))
	return subtle.ConstantTimeCompare(gu[:], wu[:])&subtle.ConstantTimeCompare(gp[:], wp[:]) == 1
}

// MatchBasic reports whether a Proxy-Authorization header value carries c
// as Basic credentials (RFC 7617; the scheme is case-insensitive).
func (c Credentials) MatchBasic(header string) bool {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return false
	}
	// Strict: only the canonical encoding, so that one set of credentials
	// has one spelling (the fuzz invariant relies on it).
	raw, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSpace(token))
	if err != nil {
		return false
	}
	user, password, ok := strings.Cut(string(raw), ":")
	return ok && c.Match(user, password)
}

// Userinfo returns c for a proxy URL (http://USER:PASSWORD@127.0.0.1:PORT),
// or nil when c is empty.
func (c Credentials) Userinfo() *url.Userinfo {
	if !c.Enabled() {
		return nil
	}
	return url.UserPassword(c.User, c.Password)
}

// String never shows the password, so that credentials printed by mistake
// do not end up in a log.
func (c Credentials) String() string {
	if !c.Enabled() {
		return "(no credentials)"
	}
	return c.User + ":[redacted]"
}

// GoString keeps %#v from printing the password too.
func (c Credentials) GoString() string { return "proxyauth.Credentials{" + c.String() + "}" }
