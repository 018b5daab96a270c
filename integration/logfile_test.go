package integration

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogFileRecordsEveryDecision: while the disk has room, every request a
// run makes is one line of --log-file, allowed and denied alike.
func TestLogFileRecordsEveryDecision(t *testing.T) {
	need(t, "curl")
	port := server(t, hello())
	log := filepath.Join(t.TempDir(), "egress.jsonl")
	const n = 10
	script := `i=0; while [ $i -lt 10 ]; do
curl -sS -o /dev/null "http://allowed.test:$1/$i"; curl -sS -o /dev/null "http://denied.test:$1/$i"; i=$((i+1)); done; true`
	r := hermetic(t, runOpts{}, args("--allow-domain", "allowed.test", loopbackNames("allowed.test", "denied.test"),
		"--log-file", log, "--", "sh", "-c", script, "sh", port)...)
	if r.code != 0 {
		t.Fatalf("run failed\n%s", r)
	}
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	count := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var d struct{ Verdict, Host string }
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		count[d.Verdict+" "+d.Host]++
	}
	if count["allow allowed.test"] != n || count["deny denied.test"] != n {
		t.Errorf("log has %v, want %d allowed and %d denied decisions\n%s", count, n, n, r)
	}
}

// TestLogFileFullDisk: a log that cannot be written (the kernel's /dev/full
// answers every write with ENOSPC) gives one clear error while the run goes
// on, and enforcement does not depend on it.
func TestLogFileFullDisk(t *testing.T) {
	need(t, "curl")
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full on this machine")
	}
	port := server(t, hello())
	r := hermetic(t, runOpts{}, args("--allow-domain", "allowed.test", loopbackNames("allowed.test", "denied.test"),
		"--log-file", "/dev/full", "--", "sh", "-c",
		`curl -sS "http://allowed.test:$1/"; curl -sS "http://denied.test:$1/"; curl -sS "http://allowed.test:$1/again"`, "sh", port)...)
	mustContain(t, r, "hello allowed.test:"+port, "not-allowlisted; allow it with --allow-domain denied.test",
		"hermetic: --log-file /dev/full: ", "no space left on device", "decisions are still enforced")
	if c := strings.Count(r.stderr, "hermetic: --log-file"); c != 1 {
		t.Errorf("the log error was reported %d times, want once\n%s", c, r)
	}
	if strings.Count(r.stdout, "hello allowed.test") != 2 {
		t.Errorf("allowed requests did not both succeed\n%s", r)
	}
}
