package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/hermetic-dev/hermetic/policy"
)

const checkUsage = `Usage: hermetic check [POLICY FLAGS] HOST[:PORT]...

Prints how the policy decides each destination, one line each:
  allow|deny HOST:PORT reason=REASON rule=RULE
A destination without a port is checked at port 443. Nothing is resolved or
connected to unless --resolve-now is given.

Exit status: 0 when every destination is allowed, 2 when any is denied,
1 for errors (bad rules, bad flags).

Examples:
  hermetic check --allow-domain example.com example.com.evil.test:443 169.254.169.254 sub.example.com
  hermetic check --no-network --allow-localhost localhost:8080 example.com
  hermetic check --network=open --deny-cidr 10.0.0.0/8 10.1.2.3:22 --json

Flags:
`

// runCheck implements `hermetic check`.
func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("hermetic check", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	var (
		pf         policyFlags
		asJSON     bool
		resolveNow bool
	)
	pf.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print JSON lines instead of text")
	fs.BoolVar(&resolveNow, "resolve-now", false, "also resolve each allowed name and judge every address it resolves to")
	fs.Usage = func() { fmt.Fprint(stdout, checkUsage+fs.FlagUsages()) }
	if err := fs.Parse(args); err != nil {
		if err == pflag.ErrHelp {
			fs.Usage()
			return 0
		}
		fmt.Fprintf(stderr, "hermetic check: %v\nRun 'hermetic check --help' for usage.\n", err)
		return 1
	}
	if err := pf.load(); err != nil {
		fmt.Fprintf(stderr, "hermetic check: %v\n", err)
		return 1
	}
	if !pf.engaged() {
		fmt.Fprintln(stderr, "hermetic check: no network policy given; add --no-network, --network=MODE, --allow-domain, --allow-cidr, --allow-localhost, --deny-domain or --deny-cidr")
		return 1
	}
	dests := fs.Args()
	if len(dests) == 0 {
		fmt.Fprintln(stderr, "hermetic check: no destination given; for example: hermetic check --allow-domain example.com api.example.com:443")
		return 1
	}
	p, err := policy.New(pf.config())
	if err != nil {
		fmt.Fprintf(stderr, "hermetic check: %v\n", err)
		return 1
	}
	for _, w := range p.Warnings() {
		fmt.Fprintln(stderr, "hermetic check: "+w)
	}
	out := func(d policy.Decision) {
		if asJSON {
			b, _ := json.Marshal(d)
			fmt.Fprintf(stdout, "%s\n", b)
			return
		}
		fmt.Fprintln(stdout, d.String())
	}
	code := 0
	for _, dest := range dests {
		for _, d := range checkOne(p, dest, resolveNow) {
			d.Component = policy.ComponentCheck
			d.Time = time.Now()
			out(d)
			if !d.Allowed() {
				code = 2
			}
		}
	}
	return code
}

// checkOne decides one destination; with resolveNow an allowed name gives
// one decision per address it resolves to.
func checkOne(p *policy.Policy, dest string, resolveNow bool) []policy.Decision {
	host, port, err := splitDestination(dest)
	if err != nil {
		return []policy.Decision{{Verdict: policy.Deny, Reason: policy.ReasonInvalidHost, Host: dest, Hint: err.Error()}}
	}
	d := p.Decide(host, port)
	if !resolveNow || !d.Allowed() || d.Addr.IsValid() {
		return []policy.Decision{d}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", d.Host)
	if err != nil || len(addrs) == 0 {
		d.Verdict, d.Hint = policy.Deny, fmt.Sprintf("could not resolve %s: %v", d.Host, err)
		return []policy.Decision{d}
	}
	out := make([]policy.Decision, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, p.CheckAddr(d, a))
	}
	return out
}

// splitDestination reads HOST, HOST:PORT, [IPv6]:PORT or a bare IPv6
// address (always a whole address); the port defaults to 443.
func splitDestination(s string) (string, uint16, error) {
	const defaultPort = 443
	host, portStr := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return s, defaultPort, fmt.Errorf("unbalanced '['")
		}
		host = s[:end+1]
		switch rest := s[end+1:]; {
		case rest == "":
		case rest[0] == ':':
			portStr = rest[1:]
		default:
			return s, defaultPort, fmt.Errorf("unexpected %q after ']'", rest)
		}
	case strings.Count(s, ":") == 1:
		i := strings.IndexByte(s, ':')
		host, portStr = s[:i], s[i+1:]
	}
	if portStr == "" && host != s && !strings.HasSuffix(host, "]") {
		return s, defaultPort, fmt.Errorf("empty port")
	}
	if portStr == "" {
		if strings.HasPrefix(s, "[") && strings.HasSuffix(s, ":") {
			return s, defaultPort, fmt.Errorf("empty port")
		}
		return host, defaultPort, nil
	}
	port, err := policy.ParsePort(portStr)
	if err != nil {
		return s, defaultPort, err
	}
	return host, port, nil
}
