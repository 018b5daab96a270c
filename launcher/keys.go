package launcher

import (
	"github.com/hermetic-dev/hermetic/policy"
)

// keyKind is the type of a setting.
type keyKind uint8

const (
	kindBool   keyKind = iota
	kindString         // a scalar string
	kindList           // a list of strings; lists accumulate across sources
	kindFS             // fs-readonly: a bool, or a root path that implies true
)

// key describes one setting: its flag and config-file name, its type, and
// what checks its values.
type key struct {
	name  string
	kind  keyKind
	usage string
	// flag is false for config-only keys (allow, deny, profiles).
	flag bool
	// policy marks the flags `hermetic check` takes: those that make up
	// the network policy, and --profile and --config.
	policy bool
	// inProfile is true for keys a profile may set: restrictions and
	// allowlist entries only.
	inProfile bool
	// rules, for rule lists, is the rule kind; allow selects allow-list checks.
	rules     policy.RuleKind
	isRule    bool
	allowRule bool
	// path values are made absolute against the source's directory.
	path bool
}

// keys is every setting hermetic knows, in the order --help lists them.
// It is read-only.
var keys = []key{
	{name: "no-network", policy: true, kind: kindBool, flag: true, inProfile: true,
		usage: "block all network egress (loopback too, unless --allow-localhost)"},
	{name: "network", policy: true, kind: kindString, flag: true, inProfile: true,
		usage: "network posture: `MODE` is blocked, allowlist or open"},
	{name: "allow-domain", policy: true, kind: kindList, flag: true, inProfile: true, isRule: true, rules: policy.NameRule, allowRule: true,
		usage: "allow `DOMAIN[:PORT]` and its subdomains (*.DOMAIN: subdomains only); repeatable"},
	{name: "allow-cidr", policy: true, kind: kindList, flag: true, inProfile: true, isRule: true, rules: policy.AddrRule, allowRule: true,
		usage: "allow an address or range, `CIDR[:PORT]`; repeatable"},
	{name: "allow", kind: kindList, inProfile: true, isRule: true, rules: policy.AnyRule, allowRule: true},
	{name: "allow-localhost", policy: true, kind: kindBool, flag: true, inProfile: true,
		usage: "allow loopback (localhost, 127.0.0.0/8, ::1)"},
	{name: "deny-domain", policy: true, kind: kindList, flag: true, inProfile: true, isRule: true, rules: policy.NameRule,
		usage: "deny `DOMAIN[:PORT]` and its subdomains; deny wins over allow; alias --deny-host; repeatable"},
	{name: "deny-cidr", policy: true, kind: kindList, flag: true, inProfile: true, isRule: true, rules: policy.AddrRule,
		usage: "deny an address or range, `CIDR[:PORT]`; deny wins over allow; alias --deny-ip; repeatable"},
	{name: "deny", kind: kindList, inProfile: true, isRule: true, rules: policy.AnyRule},
	{name: "audit", policy: true, kind: kindBool, flag: true,
		usage: "let denied connections through, log them, and print the allowlist the run needed"},
	{name: "fail-on-block", kind: kindBool, flag: true, inProfile: true,
		usage: "exit 2 if anything was blocked, even when the target succeeded"},
	{name: "trace", kind: kindBool, flag: true,
		usage: "print one line per blocked action on stderr"},
	{name: "log-file", kind: kindString, flag: true, path: true,
		usage: "append every decision to `PATH` as JSON lines"},
	{name: "quiet", kind: kindBool, flag: true,
		usage: "silence hermetic's warnings and exit summary (errors, --trace and --audit still print)"},
	{name: "profile", policy: true, kind: kindList, flag: true,
		usage: "apply profile `NAME`: net-hermetic, exec-deny, fs-readonly, strict-imports, block-all, pypi, or one from the config file; repeatable"},
	{name: "config", policy: true, kind: kindString, flag: true, path: true,
		usage: "read settings from this `FILE` instead of searching for pyproject.toml or HERMETIC.toml"},
	{name: "env-scrub", kind: kindBool, flag: true, inProfile: true,
		usage: "remove secret-looking variables (*TOKEN*, *SECRET*, *PASSWORD*, *PASSWD*, *CREDENTIAL*, *_KEY, AWS_*) from the target's environment"},
	{name: "env-keep", kind: kindList, flag: true,
		usage: "keep variable `NAME` (or a pattern such as CI_*) despite --env-scrub; repeatable"},
	{name: "resolve", kind: kindList, flag: true,
		usage: "answer lookups of HOST with IP instead of asking DNS (`HOST=IP`); repeatable"},
	{name: "proxy-url", kind: kindString, flag: true,
		usage: "bring your own HTTP proxy at `URL`: the target gets it, hermetic starts no proxy and filters nothing"},
	{name: "socks-url", kind: kindString, flag: true,
		usage: "bring your own SOCKS5 proxy at `URL` (socks5h://HOST:PORT) for ALL_PROXY"},
	{name: "isolate", kind: kindString, flag: true,
		usage: "kernel isolation `MODE` (Linux): auto (the default) runs --no-network and allowlist runs in their own network namespace, where no client gets out but through the proxies, and falls back to none with one warning where user namespaces are unavailable; netns insists (an error where unavailable); none filters only clients that use the proxy settings"},
	{name: "expose-host-port", kind: kindList, flag: true,
		usage: "bring the host's loopback `PORT` into the network namespace (127.0.0.1:PORT inside reaches it); repeatable"},
	{name: "no-subprocess", kind: kindBool, flag: true, inProfile: true,
		usage: "Python guard: block subprocesses, exec, spawn and fork"},
	{name: "fs-readonly", kind: kindFS, flag: true, inProfile: true,
		usage: "Python guard: deny every write and confine reads to the working directory, HERMETIC_FS_ROOT, or ROOT with --fs-readonly=ROOT"},
	{name: "block-native", kind: kindBool, flag: true, inProfile: true,
		usage: "Python guard: block ctypes, cffi and native extensions outside the standard library (alias --strict-imports)"},
	{name: "seal", kind: kindBool, flag: true, inProfile: true,
		usage: "Python guard: make the guards impossible to remove from inside the process"},
	// fs-root is set by --fs-readonly=ROOT, fs-readonly = "ROOT" and
	// HERMETIC_FS_ROOT; it has no flag or key of its own.
	{name: "fs-root", kind: kindString, path: true},
}

// keyAliases maps alternative flag and config names to their key.
var keyAliases = map[string]string{
	"deny-host":      "deny-domain",
	"deny-ip":        "deny-cidr",
	"strict-imports": "block-native",
}

func lookupKey(name string) (key, bool) {
	if a, ok := keyAliases[name]; ok {
		name = a
	}
	for _, k := range keys {
		if k.name == name {
			return k, true
		}
	}
	return key{}, false
}

// builtinProfiles are the profiles of SPEC §6, as settings they add.
func builtinProfile(name string) ([]entry, bool) {
	where := "profile " + name
	b := func(k string) entry { return entry{key: k, b: true, where: where} }
	switch name {
	case "net-hermetic":
		return []entry{b("no-network"), b("allow-localhost")}, true
	case "exec-deny":
		return []entry{b("no-subprocess")}, true
	case "fs-readonly":
		return []entry{b("fs-readonly")}, true
	case "strict-imports":
		return []entry{b("block-native")}, true
	case "block-all":
		return []entry{b("no-network"), b("no-subprocess"), b("fs-readonly"), b("block-native")}, true
	case "pypi":
		return []entry{{key: "allow", list: append([]string(nil), policy.PyPIHosts...), where: where}}, true
	}
	return nil, false
}

// builtinProfileNames lists the built-in profiles for messages.
const builtinProfileNames = "net-hermetic, exec-deny, fs-readonly, strict-imports, block-all, pypi"
