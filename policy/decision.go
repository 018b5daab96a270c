package policy

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// Verdict is the outcome of a decision.
type Verdict uint8

const (
	Deny Verdict = iota
	Allow
)

func (v Verdict) String() string {
	if v == Allow {
		return "allow"
	}
	return "deny"
}

// Reason says why a decision was made. The values are part of hermetic's
// user interface (check lines, X-Hermetic-Decision, logs), so they never change.
type Reason string

const (
	ReasonInvalidHost    Reason = "invalid-host"
	ReasonSelf           Reason = "self"
	ReasonCloudMetadata  Reason = "cloud-metadata"
	ReasonLinkLocal      Reason = "link-local"
	ReasonUnspecified    Reason = "unspecified"
	ReasonDenylisted     Reason = "denylisted"
	ReasonNoNetwork      Reason = "no-network"
	ReasonNotAllowlisted Reason = "not-allowlisted"
	ReasonPrivateAddress Reason = "private-address"
	ReasonAllowlisted    Reason = "allowlisted"
	ReasonLocalhost      Reason = "localhost"
	ReasonOpen           Reason = "open"
)

// AlwaysDenied reports whether no flag, posture or --audit can let a
// destination with this reason through.
func (r Reason) AlwaysDenied() bool {
	switch r {
	case ReasonInvalidHost, ReasonSelf, ReasonCloudMetadata, ReasonLinkLocal, ReasonUnspecified:
		return true
	}
	return false
}

// Component names the part of hermetic that asked for a decision.
type Component string

const (
	ComponentHTTP   Component = "http"
	ComponentSOCKS  Component = "socks"
	ComponentDNS    Component = "dns"
	ComponentPython Component = "python"
	ComponentCheck  Component = "check"
)

// Decision is the full record of one decision: what was asked, what was
// decided, why, and what the user could do about it.
type Decision struct {
	Verdict Verdict
	Reason  Reason
	// Rule is the rule that matched, in canonical form; empty when none did.
	Rule string
	// Host is the normalised host (an IPv6 address without brackets), or the
	// host as it was given when it is invalid.
	Host string
	Port uint16
	// Addr is the resolved or dialled address, when there is one.
	Addr      netip.Addr
	Component Component
	Time      time.Time
	// Hint tells the user what would allow the destination, or why nothing can.
	Hint string
	// Audited is set when the policy denied the destination but --audit let
	// it through.
	Audited bool
}

// Allowed reports whether the verdict is Allow.
func (d Decision) Allowed() bool { return d.Verdict == Allow }

// HostPort is the destination as HOST:PORT, with IPv6 in brackets and an
// invalid host quoted so that control bytes cannot forge output.
func (d Decision) HostPort() string {
	if d.Reason == ReasonInvalidHost {
		// As typed, escaped, never bracketed: it may not be a host at all.
		q := strconv.Quote(d.Host)
		q = q[1 : len(q)-1]
		if d.Port == 0 {
			return q
		}
		return q + ":" + strconv.Itoa(int(d.Port))
	}
	return net.JoinHostPort(d.Host, strconv.Itoa(int(d.Port)))
}

// RuleText is the matched rule, or "-" when no rule matched.
func (d Decision) RuleText() string {
	if d.Rule == "" {
		return "-"
	}
	return d.Rule
}

// String is the line that `hermetic check` prints (SPEC §4.7):
// "allow|deny HOST:PORT reason=REASON rule=RULE".
func (d Decision) String() string {
	return fmt.Sprintf("%s %s reason=%s rule=%s", d.Verdict, d.HostPort(), d.Reason, d.RuleText())
}

// Refusal is a one-line message for a client or user whose connection was
// refused: what was refused, why, and what would allow it.
//
// It goes to the client, which may be the code being contained, so it never
// names an address that a name resolved to: that would hand out internal
// addresses that the DNS filter withholds. The trace and the log have it.
func (d Decision) Refusal() string {
	msg := fmt.Sprintf("hermetic refused %s: %s", d.HostPort(), d.Reason)
	hint := d.Hint
	if d.Addr.IsValid() && d.Addr.String() != d.Host && d.Reason == ReasonPrivateAddress {
		hint = "the name resolves to an internal address; hermetic's --trace line names the --allow-cidr rule that would allow it"
	}
	if hint != "" {
		msg += "; " + hint
	}
	return msg
}

// jsonDecision is the JSON-lines form of a decision (--log-file, check --json).
type jsonDecision struct {
	Time      string `json:"time"`
	Verdict   string `json:"verdict"`
	Reason    Reason `json:"reason"`
	Rule      string `json:"rule"`
	Host      string `json:"host"`
	Port      uint16 `json:"port"`
	Addr      string `json:"addr,omitempty"`
	Component string `json:"component"`
	Hint      string `json:"hint,omitempty"`
	Audited   bool   `json:"audited,omitempty"`
}

// MarshalJSON encodes the decision as one flat JSON object.
func (d Decision) MarshalJSON() ([]byte, error) {
	j := jsonDecision{
		Verdict:   d.Verdict.String(),
		Reason:    d.Reason,
		Rule:      d.Rule,
		Host:      d.Host,
		Port:      d.Port,
		Component: string(d.Component),
		Hint:      d.Hint,
		Audited:   d.Audited,
	}
	if !d.Time.IsZero() {
		j.Time = d.Time.UTC().Format(time.RFC3339Nano)
	}
	if d.Addr.IsValid() {
		j.Addr = d.Addr.String()
	}
	return json.Marshal(j)
}

// DeniedError is returned by the guarded dialer when the policy refuses a
// destination. Proxies use the Decision to build their refusal.
type DeniedError struct {
	Decision Decision
}

func (e *DeniedError) Error() string { return e.Decision.Refusal() }
