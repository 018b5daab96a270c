package launcher

import (
	"os/exec"
	"slices"
	"testing"
)

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  bool
	}{
		{in: "", want: nil},
		{in: "   \t\n ", want: nil},
		{in: "--no-network", want: []string{"--no-network"}},
		{in: "  --a   --b\t--c\n", want: []string{"--a", "--b", "--c"}},
		{in: `--allow-domain 'a b'`, want: []string{"--allow-domain", "a b"}},
		{in: `--x="a b" c`, want: []string{"--x=a b", "c"}},
		{in: `'' ""`, want: []string{"", ""}},
		{in: `a\ b`, want: []string{"a b"}},
		{in: `"a\"b" 'c\d'`, want: []string{`a"b`, `c\d`}},
		{in: `"a\nb"`, want: []string{`a\nb`}},
		{in: `$(touch /tmp/x) ${HOME} ` + "`id`", want: []string{"$(touch", "/tmp/x)", "${HOME}", "`id`"}},
		{in: `*.example.com`, want: []string{"*.example.com"}},
		{in: `a"b"'c'd`, want: []string{"abcd"}},
		{in: `'unterminated`, err: true},
		{in: `"unterminated`, err: true},
		{in: `trailing\`, err: true},
	}
	for _, tt := range tests {
		got, err := SplitWords(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("SplitWords(%q) error = %v, want error %v", tt.in, err, tt.err)
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("SplitWords(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestShellQuoteRoundTrip checks that a real shell reads a quoted word back
// as the same single word, which GIT_SSH_COMMAND relies on.
func TestShellQuoteRoundTrip(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	for _, s := range []string{"plain", "with space", "it's", `"dq"`, "$(id)", "a\nb", "", "/tmp/dir with 'quotes'/hermetic"} {
		out, err := exec.Command(sh, "-c", "printf %s "+shellQuote(s)).Output()
		if err != nil {
			t.Fatalf("sh: %v", err)
		}
		if string(out) != s {
			t.Errorf("shellQuote(%q) read back as %q", s, out)
		}
		words, err := SplitWords(shellQuote(s))
		if err != nil || len(words) != 1 || words[0] != s {
			t.Errorf("SplitWords(shellQuote(%q)) = %q, %v", s, words, err)
		}
	}
}

func FuzzSplitWords(f *testing.F) {
	for _, s := range []string{"", "a b", `'a' "b" c\ d`, `"\"`, `'`, "\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := SplitWords(s)
		if err != nil {
			return
		}
		// Quoting each word and splitting again must give the same words.
		var joined string
		for i, w := range words {
			if i > 0 {
				joined += " "
			}
			joined += shellQuote(w)
		}
		again, err := SplitWords(joined)
		if err != nil || !slices.Equal(again, words) {
			t.Fatalf("round trip of %q: %q -> %q (%v)", s, words, again, err)
		}
	})
}
