package policy

import (
	"encoding/json"
	"net/netip"
	"os"
	"testing"
)

// The vectors in testdata/vectors.json are shared with the Python shim's
// tests, so that both implementations of normalisation and decisions agree.
type vectorFile struct {
	Normalize []struct {
		Input   string `json:"input"`
		Want    string `json:"want"`
		Invalid bool   `json:"invalid"`
	} `json:"normalize"`
	Decide []struct {
		Name   string `json:"name"`
		Policy struct {
			Network        string   `json:"network"`
			NoNetwork      bool     `json:"no_network"`
			Allow          []string `json:"allow"`
			Deny           []string `json:"deny"`
			AllowLocalhost bool     `json:"allow_localhost"`
		} `json:"policy"`
		Host     string `json:"host"`
		Port     uint16 `json:"port"`
		Resolved string `json:"resolved"`
		Verdict  string `json:"verdict"`
		Reason   string `json:"reason"`
		Rule     string `json:"rule"`
	} `json:"decide"`
}

func loadVectors(t testing.TB) vectorFile {
	b, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectorFile
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("testdata/vectors.json: %v", err)
	}
	return v
}

func TestVectorsNormalize(t *testing.T) {
	v := loadVectors(t)
	if len(v.Normalize) < 100 {
		t.Fatalf("only %d normalize vectors", len(v.Normalize))
	}
	for _, c := range v.Normalize {
		h, err := NormalizeHost(c.Input)
		switch {
		case c.Invalid && err == nil:
			t.Errorf("Normalize(%q) = %q, want invalid", c.Input, h)
		case !c.Invalid && err != nil:
			t.Errorf("Normalize(%q) error %v, want %q", c.Input, err, c.Want)
		case !c.Invalid && h.String() != c.Want:
			t.Errorf("Normalize(%q) = %q, want %q", c.Input, h, c.Want)
		}
	}
}

func TestVectorsDecide(t *testing.T) {
	v := loadVectors(t)
	if len(v.Decide) < 250 {
		t.Fatalf("only %d decide vectors", len(v.Decide))
	}
	for _, c := range v.Decide {
		p, err := New(Config{Network: c.Policy.Network, NoNetwork: c.Policy.NoNetwork,
			Allow: c.Policy.Allow, Deny: c.Policy.Deny, AllowLocalhost: c.Policy.AllowLocalhost})
		if err != nil {
			t.Errorf("%s: New: %v", c.Name, err)
			continue
		}
		d := p.Decide(c.Host, c.Port)
		if c.Resolved != "" {
			a, err := netip.ParseAddr(c.Resolved)
			if err != nil {
				t.Errorf("%s: bad resolved %q", c.Name, c.Resolved)
				continue
			}
			if d.Allowed() {
				d = p.CheckAddr(d, a)
			}
		}
		if d.Verdict.String() != c.Verdict || string(d.Reason) != c.Reason || (c.Rule != "" && d.Rule != c.Rule) {
			t.Errorf("%s: %q port %d resolved %q: got %v; want %s reason=%s rule=%s",
				c.Name, c.Host, c.Port, c.Resolved, d, c.Verdict, c.Reason, c.Rule)
		}
	}
}
