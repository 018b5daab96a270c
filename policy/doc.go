// Package policy is hermetic's single source of network decisions: it parses
// allow and deny rules, normalises destinations, decides whether a (host, port)
// may be reached, and provides the one guarded dialer that every proxy route
// uses, together with the decision events that feed traces and logs.
//
// Nothing outside this package decides whether a destination is allowed; the
// HTTP proxy, the SOCKS5 proxy, the DNS filter and `hermetic check` all ask a
// *Policy, so they can never disagree.
package policy
