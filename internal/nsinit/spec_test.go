package nsinit

import (
	"fmt"
	"testing"
)

func TestSpecRoundTrip(t *testing.T) {
	for _, s := range []Spec{
		{HTTPPort: 20001, SOCKSPort: 20002, ResolvConf: "/tmp/a,b/resolv.conf"},
		{HTTPPort: 1, SOCKSPort: 65535, Expose: []uint16{5432, 6379}, ResolvConf: "/x"},
	} {
		got, err := Decode(s.Encode())
		if err != nil || fmt.Sprint(got) != fmt.Sprint(s) {
			t.Errorf("round trip of %+v = %+v, %v", s, got, err)
		}
	}
	for _, bad := range []string{"", "1,2", "0,2,,/x", "1,2,x,/x", "1,70000,,/x", "1,2,3:,/x"} {
		if _, err := Decode(bad); err == nil {
			t.Errorf("Decode(%q) succeeded", bad)
		}
	}
}
