package policy

import (
	"fmt"
	"net/netip"
	"testing"
)

func benchPolicy(b *testing.B, n int) *Policy {
	rules := make([]string, 0, n+2)
	for i := 0; len(rules) < n/2; i++ {
		rules = append(rules, fmt.Sprintf("svc%d.example%d.com", i, i%97))
	}
	for i := 0; len(rules) < n; i++ {
		rules = append(rules, fmt.Sprintf("10.%d.%d.0/24", (i/256)%256, i%256))
	}
	rules = append(rules, "api.example.org")
	p, err := New(Config{Allow: rules})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkDecideName is the hot path: a name already normalised (the proxies
// normalise once per connection) decided against n rules.
func BenchmarkDecideName(b *testing.B) {
	for _, n := range []int{10, 10000} {
		p := benchPolicy(b, n)
		h := Host{Name: "deep.sub.api.example.org"}
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d := p.DecideHost(h, 443); !d.Allowed() {
					b.Fatal(d)
				}
			}
		})
		miss := Host{Name: "deep.sub.api.example.net"}
		b.Run(fmt.Sprintf("rules=%d/miss", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.DecideHost(miss, 443)
			}
		})
	}
}

func BenchmarkDecideAddr(b *testing.B) {
	for _, n := range []int{10, 10000} {
		p := benchPolicy(b, n)
		h := Host{Addr: netip.MustParseAddr("10.0.3.7")}
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d := p.DecideHost(h, 443); !d.Allowed() {
					b.Fatal(d)
				}
			}
		})
	}
}

// BenchmarkDecideRaw includes normalisation of a host as a client sends it.
func BenchmarkDecideRaw(b *testing.B) {
	p := benchPolicy(b, 10000)
	for _, host := range []string{"deep.sub.api.example.org", "Deep.Sub.API.example.org.", "bücher.example.org", "0x0a000307"} {
		b.Run(host, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Decide(host, 443)
			}
		})
	}
}
