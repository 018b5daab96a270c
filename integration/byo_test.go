package integration

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestBringYourOwnProxy gives curl a proxy of the user's with --proxy-url:
// hermetic starts none and filters nothing, so any name reaches that proxy,
// which answers in place of the origin.
func TestBringYourOwnProxy(t *testing.T) {
	need(t, "curl")
	var (
		mu   sync.Mutex
		seen []string
	)
	port := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.String())
		mu.Unlock()
		fmt.Fprintf(w, "via byo %s\n", r.URL.Host)
	}))
	proxyURL := "http://127.0.0.1:" + port
	r := hermetic(t, runOpts{env: []string{"HTTP_PROXY=http://127.0.0.1:1"}}, "--proxy-url", proxyURL, "--trace", "--",
		"sh", "-c", `curl -sS http://anything.test/path; echo "proxy=$HTTP_PROXY"`)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r)
	}
	mustContain(t, r, "via byo anything.test", "proxy="+proxyURL)
	if strings.Contains(r.stderr, "[hermetic]") {
		t.Errorf("hermetic filtered or reported in BYO mode:\n%s", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "GET http://anything.test/path" {
		t.Errorf("the user's proxy saw %q", seen)
	}
}
