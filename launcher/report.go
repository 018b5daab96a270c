package launcher

import (
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/publicsuffix"

	"github.com/hermetic-dev/hermetic/policy"
)

// Denial is one denied destination of a run, reported once with the number
// of times it was denied.
type Denial struct {
	// Decision is the first denial of this destination.
	Decision policy.Decision
	Count    int
}

// reporter collects what a run's decisions add up to: each denied
// destination once (the exit summary), how many actions were blocked
// (--fail-on-block) and what --audit let through.
type reporter struct {
	mu      sync.Mutex
	denied  map[string]*Denial
	order   []string
	blocked int // denied or audited decisions
	audited []policy.Decision
}

func newReporter() *reporter {
	return &reporter{denied: make(map[string]*Denial)}
}

// Record implements policy.Recorder.
func (r *reporter) Record(d policy.Decision) {
	if d.Allowed() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.blocked++
	if d.Audited {
		r.audited = append(r.audited, d)
	}
	key := d.HostPort() + " " + string(d.Reason)
	if d.Audited {
		key += " audited"
	}
	if e, ok := r.denied[key]; ok {
		e.Count++
		return
	}
	r.denied[key] = &Denial{Decision: d, Count: 1}
	r.order = append(r.order, key)
}

// recorder is the dialer's Recorder for a run: it removes credentials from
// each decision (an invalid host is kept as the client typed it, which can
// be user:password@host) and fans it out to the reporter (exit summary,
// --audit), the --trace lines and the --log-file JSON lines.
func recorder(rep *reporter, trace io.Writer, log *policy.JSONWriter) policy.Recorder {
	rs := policy.Recorders{rep}
	if trace != nil {
		rs = append(rs, policy.NewTraceWriter(trace))
	}
	if log != nil {
		rs = append(rs, log)
	}
	return policy.RecorderFunc(func(d policy.Decision) {
		d.Host = redactHost(d.Host)
		d.Hint = redact(d.Hint)
		rs.Record(d)
	})
}

// Denials returns each denied (or audited) destination once, in the order
// they were first seen.
func (r *reporter) Denials() []Denial {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Denial, 0, len(r.order))
	for _, k := range r.order {
		out = append(out, *r.denied[k])
	}
	return out
}

// Blocked is the number of denied or audited decisions.
func (r *reporter) Blocked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.blocked
}

// writeSummary prints the exit summary of §4.5: each denied destination
// once, with its reason, count and what would allow it.
func writeSummary(w io.Writer, ds []Denial) {
	if len(ds) == 0 {
		return
	}
	var denied, audited []Denial
	for _, d := range ds {
		if d.Decision.Audited {
			audited = append(audited, d)
		} else {
			denied = append(denied, d)
		}
	}
	section := func(title string, list []Denial) {
		if len(list) == 0 {
			return
		}
		fmt.Fprintf(w, "[hermetic] %s:\n", title)
		for _, d := range list {
			line := fmt.Sprintf("[hermetic]   %s reason=%s", d.Decision.HostPort(), d.Decision.Reason)
			if d.Count > 1 {
				line += " count=" + strconv.Itoa(d.Count)
			}
			if d.Decision.Hint != "" {
				line += " (" + d.Decision.Hint + ")"
			}
			fmt.Fprintln(w, line)
		}
	}
	section(plural(len(denied), "destination was", "destinations were")+" denied", denied)
	section(plural(len(audited), "destination would have been", "destinations would have been")+" denied (--audit let them through)", audited)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// Audit is what --audit learned: the rules that would have let the run
// pass, and the destinations no allow rule can let through.
type Audit struct {
	// Names are name rules for --allow-domain; Addrs are address rules for
	// --allow-cidr. Both are sorted and free of duplicates.
	Names, Addrs []string
	// Unfixable are destinations denied by a deny rule or always denied;
	// adding allow rules does not help them.
	Unfixable []policy.Decision
}

// Empty reports whether the run needed nothing more.
func (a Audit) Empty() bool {
	return len(a.Names) == 0 && len(a.Addrs) == 0 && len(a.Unfixable) == 0
}

// Flags is the allowlist as hermetic flags.
func (a Audit) Flags() string {
	var parts []string
	for _, n := range a.Names {
		parts = append(parts, "--allow-domain "+shellQuote(n))
	}
	for _, n := range a.Addrs {
		parts = append(parts, "--allow-cidr "+shellQuote(n))
	}
	return strings.Join(parts, " ")
}

// TOML is the allowlist as a config snippet for pyproject.toml (in
// HERMETIC.toml the [tool.hermetic] header may be kept or left out).
func (a Audit) TOML() string {
	rules := append(slices.Clone(a.Names), a.Addrs...)
	quoted := make([]string, len(rules))
	for i, r := range rules {
		quoted[i] = strconv.Quote(r)
	}
	return "[tool.hermetic]\nallow = [" + strings.Join(quoted, ", ") + "]\n"
}

// buildAudit works out which allow rules would have let the destinations
// --audit let through pass under cfg (the run's policy without --audit).
// First the rules steps 1-4 need: a name rule for a denied name, an address
// rule for a denied address. Then step 5 under the allowlist those rules
// make: an address rule for each internal address an allowed name resolved
// to. What no allow rule can fix (deny rules, always-denied destinations) is
// listed apart.
func buildAudit(cfg policy.Config, decs []policy.Decision) Audit {
	var a Audit
	cfg.Audit = false
	p, err := policy.New(cfg)
	if err != nil {
		return a
	}
	names := map[string]bool{}
	addrs := map[string]bool{}
	unfixable := map[string]bool{}
	addUnfixable := func(d policy.Decision) {
		k := d.HostPort() + " " + string(d.Reason)
		if !unfixable[k] {
			unfixable[k] = true
			a.Unfixable = append(a.Unfixable, d)
		}
	}
	for _, d := range decs {
		first := p.Decide(d.Host, d.Port)
		if first.Allowed() {
			continue
		}
		switch first.Reason {
		case policy.ReasonNoNetwork, policy.ReasonNotAllowlisted:
			if first.Addr.IsValid() {
				addrs[addrRule(first.Addr)] = true
			} else {
				names[first.Host] = true
			}
		default:
			addUnfixable(first)
		}
	}

	next := cfg
	if next.Network == "blocked" {
		next.Network, next.NoNetwork = "", true
	}
	next.AllowDomains = append(slices.Clone(cfg.AllowDomains), sortedKeys(names)...)
	next.AllowCIDRs = append(slices.Clone(cfg.AllowCIDRs), sortedKeys(addrs)...)
	if p2, err := policy.New(next); err == nil {
		for _, d := range decs {
			if !d.Addr.IsValid() {
				continue
			}
			dec := p2.Decide(d.Host, d.Port)
			if !dec.Allowed() || dec.Addr.IsValid() {
				continue
			}
			switch chk := p2.CheckAddr(dec, d.Addr); {
			case chk.Allowed():
			case chk.Reason == policy.ReasonPrivateAddress:
				// With its port: an internal address is opened for the one
				// service the run used, not every port of that host.
				addrs[addrPortRule(d.Addr, d.Port)] = true
			default:
				addUnfixable(chk)
			}
		}
	}
	a.Names = sortedKeys(names)
	a.Addrs = sortedKeys(addrs)
	return a
}

func addrRule(a netip.Addr) string { return a.Unmap().String() }

func addrPortRule(a netip.Addr, port uint16) string {
	if port == 0 {
		return addrRule(a)
	}
	return netip.AddrPortFrom(a.Unmap(), port).String()
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// writeAudit prints what --audit learned, as flags and as a config snippet.
func writeAudit(w io.Writer, a Audit) {
	if len(a.Names) == 0 && len(a.Addrs) == 0 {
		if len(a.Unfixable) == 0 {
			fmt.Fprintln(w, "[hermetic] audit: nothing was denied; the policy as given lets this run pass")
		}
	} else {
		fmt.Fprintln(w, "[hermetic] audit: add this allowlist to let the run pass:")
		fmt.Fprintln(w, a.Flags())
		fmt.Fprintln(w, "[hermetic] audit: or, in pyproject.toml (or HERMETIC.toml):")
		io.WriteString(w, a.TOML())
	}
	for _, n := range a.Names {
		// A hosting platform's suffix (the private part of the public
		// suffix list: github.io, workers.dev) is a valid rule, but it lets
		// through every tenant's site, not the one the run used.
		if ps, _ := publicsuffix.PublicSuffix(n); ps == n && strings.Contains(n, ".") {
			fmt.Fprintf(w, "[hermetic] audit: warning: %s is a public suffix: allowing it allows every site under it; allow the sites the run needs instead\n", n)
		}
	}
	for _, d := range a.Unfixable {
		fmt.Fprintf(w, "[hermetic] audit: %s reason=%s cannot be allowed by an allow rule", d.HostPort(), d.Reason)
		if d.Hint != "" {
			fmt.Fprintf(w, " (%s)", d.Hint)
		}
		fmt.Fprintln(w)
	}
}

func (r *reporter) auditedDecisions() []policy.Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]policy.Decision(nil), r.audited...)
}

// writeViolations summarises what the Python shim blocked: each guard and
// target once, with a count.
func writeViolations(w io.Writer, vs []violation) {
	if len(vs) == 0 {
		return
	}
	type key struct{ guard, target, reason string }
	counts := map[key]int{}
	var order []key
	for _, v := range vs {
		k := key{v.Guard, v.Target, v.Reason}
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
	}
	fmt.Fprintf(w, "[hermetic] %s in Python:\n", plural(len(order), "action was blocked", "actions were blocked"))
	for _, k := range order {
		line := fmt.Sprintf("[hermetic]   %s %s reason=%s", k.guard, redact(k.target), k.reason)
		if n := counts[k]; n > 1 {
			line += " count=" + strconv.Itoa(n)
		}
		fmt.Fprintln(w, line)
	}
}
