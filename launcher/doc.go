// Package launcher runs a target program under a hermetic policy: it merges
// the configuration sources into Settings, starts the HTTP and SOCKS5 proxies
// that share one guarded dialer, builds the target's environment (proxy
// variables, the Python guard shim), resolves and spawns the target, forwards
// signals, and reports what was blocked.
//
// A Session holds a policy that is a ceiling: each Run may narrow it, never
// widen it. The hermetic command is a thin user of this package.
package launcher
