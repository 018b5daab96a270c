package launcher

import (
	"context"
	"net"
	"net/netip"

	"github.com/hermetic-dev/hermetic/policy"
)

// staticResolver answers --resolve names from its table and every other
// name from next.
type staticResolver struct {
	table map[string][]netip.Addr
	next  policy.Resolver
}

func (r staticResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if h, err := policy.NormalizeHost(host); err == nil && !h.IsAddr() {
		if addrs, ok := r.table[h.Name]; ok {
			var out []netip.Addr
			for _, a := range addrs {
				switch {
				case network == "ip4" && !a.Is4(), network == "ip6" && !a.Is6():
					continue
				}
				out = append(out, a)
			}
			if len(out) == 0 {
				return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
			}
			return out, nil
		}
	}
	return r.next.LookupNetIP(ctx, network, host)
}
