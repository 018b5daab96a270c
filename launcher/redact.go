package launcher

import (
	"regexp"
	"strings"
	"sync"
)

// The patterns are compiled on first use, not at package init: most runs
// never redact anything, and every run pays for what init does.
var (
	// userinfoRE matches the credentials of a URL: scheme://user:pass@
	userinfoRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s]*@`)
	})
	// authRE matches an Authorization or Proxy-Authorization value: its
	// scheme word (Basic, Bearer, ...) and the credential, to the end of
	// the line or the next `,` or `;`.
	authRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)\b((?:proxy-)?authori[sz]ation)(\s*[:=]\s*)[^\r\n,;]*`)
	})
)

// redact removes credentials from text that is about to be logged: the
// user information of URLs, Authorization and Proxy-Authorization values,
// and a bare `user:password@host`.
func redact(s string) string {
	if !strings.ContainsAny(s, "@:=") {
		return s
	}
	s = userinfoRE().ReplaceAllString(s, "${1}REDACTED@")
	s = authRE().ReplaceAllString(s, "${1}${2}REDACTED")
	return s
}

// redactHost removes a `user:password@` prefix from a host as a client
// sent it (an invalid host is logged as typed).
func redactHost(h string) string {
	if i := strings.LastIndexByte(h, '@'); i >= 0 {
		h = "REDACTED@" + h[i+1:]
	}
	return redact(h)
}

// redactURL removes the user information of a proxy URL for display.
func redactURL(u string) string { return redact(u) }
