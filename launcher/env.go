package launcher

import (
	"path"
	"strconv"
	"strings"
)

// loopbackNoProxy is the only NO_PROXY the target gets: inherited entries
// are dropped because each one would be a way around the policy.
const loopbackNoProxy = "localhost,127.0.0.1,::1"

// proxyEnv says where the target's proxy variables point.
type proxyEnv struct {
	// HTTP is the HTTP proxy URL ("http://127.0.0.1:PORT"), or empty.
	HTTP string
	// SOCKS is the SOCKS5 proxy URL ("socks5h://127.0.0.1:PORT"), or empty.
	SOCKS string
	// GitSSH is the GIT_SSH_COMMAND value, or empty.
	GitSSH string
	// GitProxy is the GIT_PROXY_COMMAND value (git:// through SOCKS5), or empty.
	GitProxy string
}

// envSpec is everything the target's environment is built from.
type envSpec struct {
	Base []string
	// Proxy, when set, replaces every inherited proxy setting.
	Proxy *proxyEnv
	// ShimDir, when set, goes first on PYTHONPATH; ShimVar=ShimValue carries
	// the shim's settings.
	ShimDir, ShimVar, ShimValue string
	// Scrub removes secret-looking variables except those matching Keep
	// (exact names or path.Match patterns).
	Scrub bool
	Keep  []string
}

// buildEnv returns the target's environment and the names --env-scrub
// removed.
func buildEnv(s envSpec) (env, scrubbed []string) {
	var e envList
	for _, kv := range s.Base {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		if s.Proxy != nil && isProxyVar(name) {
			continue
		}
		if s.Scrub && isSecretName(name) && !keepName(name, s.Keep) {
			scrubbed = append(scrubbed, name)
			continue
		}
		e.set(kv[:len(name)], kv[len(name)+1:])
	}
	if p := s.Proxy; p != nil {
		if p.HTTP != "" {
			for _, n := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
				e.set(n, p.HTTP)
			}
			// Tools whose own configuration files can name a proxy read
			// these variables before those files, so pin them too.
			e.set("PIP_PROXY", p.HTTP)
			e.set("npm_config_proxy", p.HTTP)
			e.set("npm_config_https_proxy", p.HTTP)
			e.addGitConfig("http.proxy", p.HTTP)
		}
		if p.SOCKS != "" {
			e.set("ALL_PROXY", p.SOCKS)
			e.set("all_proxy", p.SOCKS)
		}
		e.set("NO_PROXY", loopbackNoProxy)
		e.set("no_proxy", loopbackNoProxy)
		e.set("NODE_USE_ENV_PROXY", "1")
		if p.GitSSH != "" {
			e.set("GIT_SSH_COMMAND", p.GitSSH)
		}
		if p.GitProxy != "" {
			e.set("GIT_PROXY_COMMAND", p.GitProxy)
		}
	}
	if s.ShimDir != "" {
		pp := s.ShimDir
		if old, ok := e.get("PYTHONPATH"); ok && old != "" {
			pp += ":" + old
		}
		e.set("PYTHONPATH", pp)
		if s.ShimVar != "" {
			e.set(s.ShimVar, s.ShimValue)
		}
	}
	return e.list(), scrubbed
}

// isProxyVar reports whether an inherited variable configures a proxy or a
// proxy bypass. Each of them could send traffic around hermetic's proxies,
// so all are dropped when hermetic controls the network, not only the ones
// it sets itself.
func isProxyVar(name string) bool {
	u := strings.ToUpper(name)
	switch {
	case strings.HasSuffix(u, "_PROXY"), strings.HasSuffix(u, "NOPROXY"),
		strings.HasSuffix(u, "_PROXY_COMMAND"):
		return true
	}
	switch u {
	// GIT_CONFIG_PARAMETERS (git -c) is read after GIT_CONFIG_COUNT, so an
	// inherited http.proxy there would beat the one hermetic sets.
	case "GIT_SSH_COMMAND", "GIT_CONFIG_PARAMETERS", "SOCKS_SERVER", "SOCKS5_SERVER", "SOCKS_VERSION":
		return true
	}
	return false
}

// isSecretName reports whether --env-scrub removes a variable.
func isSecretName(name string) bool {
	u := strings.ToUpper(name)
	for _, s := range []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"} {
		if strings.Contains(u, s) {
			return true
		}
	}
	return strings.HasSuffix(u, "_KEY") || strings.HasPrefix(u, "AWS_")
}

func keepName(name string, keep []string) bool {
	for _, k := range keep {
		if k == name {
			return true
		}
		if ok, err := path.Match(k, name); err == nil && ok {
			return true
		}
	}
	return false
}

// envList is an environment that keeps its order and has one entry per name.
type envList struct {
	names []string
	vals  map[string]string
}

func (e *envList) set(name, val string) {
	if e.vals == nil {
		e.vals = make(map[string]string)
	}
	if _, ok := e.vals[name]; !ok {
		e.names = append(e.names, name)
	}
	e.vals[name] = val
}

func (e *envList) get(name string) (string, bool) {
	v, ok := e.vals[name]
	return v, ok
}

// addGitConfig appends one setting to git's environment configuration
// (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_n, GIT_CONFIG_VALUE_n), which git reads
// after every configuration file, so it wins over a user's http.proxy.
func (e *envList) addGitConfig(key, val string) {
	n := 0
	if c, ok := e.get("GIT_CONFIG_COUNT"); ok {
		v, err := strconv.Atoi(c)
		if err != nil || v < 0 || v > 1<<16 {
			// git refuses to run with a malformed count; replace it
			// rather than pass on an environment that breaks git.
			v = 0
		}
		n = v
	}
	e.set("GIT_CONFIG_KEY_"+strconv.Itoa(n), key)
	e.set("GIT_CONFIG_VALUE_"+strconv.Itoa(n), val)
	e.set("GIT_CONFIG_COUNT", strconv.Itoa(n+1))
}

func (e *envList) list() []string {
	out := make([]string, 0, len(e.names))
	for _, n := range e.names {
		out = append(out, n+"="+e.vals[n])
	}
	return out
}
