package launcher

import (
	"strings"
	"testing"
)

// TestWriteAuditWarnsOnPublicSuffixes: a suggested name that is itself a
// public suffix (a hosting platform's, from the private part of the list)
// would let every tenant's site through; the audit says so.
func TestWriteAuditWarnsOnPublicSuffixes(t *testing.T) {
	for _, tt := range []struct {
		name string
		warn bool
	}{
		{"github.io", true},
		{"workers.dev", true},
		{"myproject.github.io", false},
		{"api.example.com", false},
		{"example.com", false},
		{"gitlab", false}, // a single-label intranet name, not a suffix anyone shares
	} {
		var b strings.Builder
		writeAudit(&b, Audit{Names: []string{tt.name}})
		got := strings.Contains(b.String(), "warning: "+tt.name+" is a public suffix")
		if got != tt.warn {
			t.Errorf("%s: warning %v, want %v\n%s", tt.name, got, tt.warn, b.String())
		}
	}
}
