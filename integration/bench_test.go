package integration

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// BenchmarkStartupOverhead times `hermetic --no-network -- true` against
// `true` in the same run, alternating them, and reports both, the ratio and
// the milliseconds hermetic adds (start two proxies, write the shim, spawn,
// shut down, clean up).
func BenchmarkStartupOverhead(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true on PATH")
	}
	tmp := b.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + tmp}
	run := func(name string, args ...string) time.Duration {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		start := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		return time.Since(start)
	}
	var direct, wrapped time.Duration
	b.ResetTimer()
	for b.Loop() {
		direct += run(truePath)
		wrapped += run(hermeticBin, "--no-network", "--", truePath)
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / n }
	b.ReportMetric(ms(direct), "true-ms/op")
	b.ReportMetric(ms(wrapped), "hermetic-ms/op")
	b.ReportMetric(ms(wrapped)-ms(direct), "added-ms/op")
	b.ReportMetric(float64(wrapped)/float64(direct), "ratio")
	b.ReportMetric(0, "ns/op")
}
