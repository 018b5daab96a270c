package proxyauth

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

func TestGenerate(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		c, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("generated %v: %v", c, err)
		}
		if seen[c.Password] {
			t.Fatalf("password repeated after %d draws", len(seen))
		}
		seen[c.Password] = true
		for _, s := range []string{c.User, c.Password} {
			if strings.Trim(s, alphabet) != "" {
				t.Fatalf("%q holds characters outside [A-Za-z0-9]", s)
			}
		}
		// Nothing to escape: the URL form is the plain text.
		if got := c.Userinfo().String(); got != c.User+":"+c.Password {
			t.Fatalf("userinfo %q needs escaping", got)
		}
		u, err := url.Parse("http://" + c.User + ":" + c.Password + "@127.0.0.1:1")
		if err != nil {
			t.Fatal(err)
		}
		if p, _ := u.User.Password(); u.User.Username() != c.User || p != c.Password {
			t.Fatalf("URL round trip of %v lost it", c)
		}
	}
}

func TestMatch(t *testing.T) {
	c := Credentials{User: "u", Password: "secret"}
	basic := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		header string
		want   bool
	}{
		{basic("u:secret"), true},
		{"basic " + base64.StdEncoding.EncodeToString([]byte("u:secret")), true},
		{"  Basic   " + base64.StdEncoding.EncodeToString([]byte("u:secret")) + " ", true},
		{basic("u:secret2"), false},
		{basic("u:secre"), false},
		{basic("U:secret"), false},
		{basic("u"), false},
		{basic(":secret"), false},
		{basic("u:secret:"), false},
		{"Bearer " + base64.StdEncoding.EncodeToString([]byte("u:secret")), false},
		{"Basic u:secret", false},
		// "dTpzZWNyZXQ=" with non-zero trailing bits decodes to the same
		// bytes unless decoding is strict.
		{"Basic dTpzZWNyZXR=", false},
		{"Basic dTpzZWNyZXQ", false},
		{"Basic", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := c.MatchBasic(tt.header); got != tt.want {
			t.Errorf("MatchBasic(%q) = %v, want %v", tt.header, got, tt.want)
		}
	}
	var none Credentials
	if none.Match("", "") || none.MatchBasic(basic(":")) {
		t.Error("empty credentials matched")
	}
}

func TestValidate(t *testing.T) {
	long := strings.Repeat("x", 256)
	for _, c := range []Credentials{
		{User: "u"}, {Password: "p"}, {User: "a:b", Password: "p"}, {User: long, Password: "p"},
		{User: "u", Password: long}, {User: "u\n", Password: "p"}, {User: "u", Password: "p\x00"},
	} {
		if c.Validate() == nil {
			t.Errorf("Validate(%q, %q) = nil", c.User, c.Password)
		}
	}
	for _, c := range []Credentials{{}, {User: "u", Password: "p:q"}} {
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(%q, %q) = %v", c.User, c.Password, err)
		}
	}
}

func TestNeverPrintsPassword(t *testing.T) {
	c := Credentials{User: "u", Password: "hunter2"}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(f, c); strings.Contains(s, "hunter2") {
			t.Errorf("%s prints the password: %s", f, s)
		}
	}
}
