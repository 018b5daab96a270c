// Package proxy is hermetic's HTTP proxy: it serves CONNECT tunnels and
// absolute-form plain-HTTP requests on loopback, and reaches every upstream
// only through the shared guarded dialer, so that nothing leaves unless the
// policy allows it.
//
// It is built on github.com/elazarl/goproxy, configured so that none of that
// library's convenient defaults can open a path around the policy: the
// upstream transport never reads HTTP(S)_PROXY, every dial (the transport's
// and CONNECT's) goes through policy.Dialer, and CONNECT tunnels are hijacked
// and relayed by internal/tunnel with an idle timeout.
package proxy
