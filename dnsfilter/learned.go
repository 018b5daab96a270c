package dnsfilter

import (
	"net/netip"
	"sync"
	"time"
)

// Bounds on how long an address stays learned. The floor exists because a
// TTL of 0 or 1 would expire between a client's lookup and its connect; the
// ceiling is applied to the TTLs the filter hands out as well, so a client
// never caches an address for longer than the policy remembers it.
const (
	minLearnTTL = 10 * time.Second
	maxTTL      = time.Hour
)

// defaultLearnedSize bounds the table; a client that makes the filter learn
// more than this only loses learned entries (fails closed), never memory.
const defaultLearnedSize = 1 << 16

// Learned is the set of addresses the filter returned for allowed names,
// each valid until its TTL runs out (SPEC §3.2 step 6). It implements
// policy.Learned and is safe for concurrent use. The zero value is not
// usable; call NewLearned.
type Learned struct {
	mu  sync.Mutex
	max int
	m   map[netip.Addr]learnedEntry
}

type learnedEntry struct {
	name    string
	expires time.Time
}

// NewLearned returns an empty table holding at most max addresses (a
// default when max <= 0).
func NewLearned(max int) *Learned {
	if max <= 0 {
		max = defaultLearnedSize
	}
	return &Learned{max: max, m: make(map[netip.Addr]learnedEntry)}
}

// Lookup returns the allowed name addr was returned for, if the answer is
// still valid at now.
func (l *Learned) Lookup(addr netip.Addr, now time.Time) (string, bool) {
	addr = addr.Unmap()
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[addr]
	if !ok {
		return "", false
	}
	if !now.Before(e.expires) {
		delete(l.m, addr)
		return "", false
	}
	return e.name, true
}

// Record notes that addr was returned for name with ttl at now. The latest
// answer for an address wins: two allowed names that share an address
// (a CDN) are both allowed names, and the policy judges the name again,
// port included, when the address is used.
func (l *Learned) Record(name string, addr netip.Addr, ttl time.Duration, now time.Time) {
	addr = addr.Unmap()
	if ttl < minLearnTTL {
		ttl = minLearnTTL
	}
	if ttl > maxTTL {
		ttl = maxTTL
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.m[addr]; !ok && len(l.m) >= l.max {
		for a, e := range l.m {
			if !now.Before(e.expires) {
				delete(l.m, a)
			}
		}
		if len(l.m) >= l.max {
			// Full of live entries: not learning fails closed.
			return
		}
	}
	l.m[addr] = learnedEntry{name: name, expires: now.Add(ttl)}
}

// Len is the number of addresses held, expired ones included.
func (l *Learned) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}
