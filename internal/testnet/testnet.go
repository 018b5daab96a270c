// Package testnet holds the fixtures that tests of several packages share:
// a leak check on goroutines and descriptors, a listener that never
// completes a connection, a wheel for a loopback package index and a bare
// git repository. It is imported by tests only.
package testnet

import (
	"os"
	"runtime"
	"testing"
	"time"
)

// LeakCheck records goroutines and descriptors now and, when the test ends
// (after every later cleanup), waits a bounded while for both to come back
// to that baseline.
func LeakCheck(t *testing.T) {
	t.Helper()
	runtime.GC()
	g0, fd0 := runtime.NumGoroutine(), OpenFDs(t)
	t.Cleanup(func() {
		var g, fd int
		for range 100 {
			// Spliced copies cache pipes in a sync.Pool, closed by
			// finalizers: collect them before counting.
			runtime.GC()
			g, fd = runtime.NumGoroutine(), OpenFDs(t)
			if g <= g0 && fd <= fd0 {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("leak: goroutines %d -> %d, descriptors %d -> %d %v\n%s", g0, g, fd0, fd, fdTargets(), buf)
	})
}

// OpenFDs counts this process's open descriptors; the test is skipped where
// they cannot be counted.
func OpenFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(ents)
}

func fdTargets() []string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out = append(out, e.Name()+"="+l)
	}
	return out
}
