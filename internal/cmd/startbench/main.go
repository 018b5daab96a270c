// Command startbench measures what hermetic adds to starting a program:
// `hermetic --no-network --isolate=none -- true` against `true`, in the same
// run, interleaved so that both see the same machine load. It also times
// a Go hello-world (what any Go program costs to start), `hermetic version`
// (starting hermetic's binary: runtime and package initialisation, no run)
// and `hermetic -- true` (a run that leaves the network alone: no proxies,
// no shim), so that the table shows where the added time goes. A last row
// runs the same target in the network namespace (--isolate=netns, SPEC §5.1);
// what it adds over --isolate=none is the namespace's cost. `make bench` runs
// it.
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// targetMS is the start-up overhead the launcher issue sets as its goal.
const targetMS = 10.0

// netnsTargetMS is what the network namespace may add over --isolate=none,
// the kernel-isolation issue's goal.
const netnsTargetMS = 15.0

func main() {
	var (
		bin    = flag.String("bin", "", "hermetic binary to measure (default: build ./cmd/hermetic into a temporary directory)")
		rounds = flag.Int("rounds", 200, "measured rounds; each round runs every command once")
		warmup = flag.Int("warmup", 10, "unmeasured rounds first")
	)
	flag.Parse()
	if err := run(*bin, *rounds, *warmup); err != nil {
		fmt.Fprintln(os.Stderr, "startbench:", err)
		os.Exit(1)
	}
}

type command struct {
	label string
	argv  []string
	times []time.Duration
}

func run(bin string, rounds, warmup int) error {
	if rounds < 1 || warmup < 0 {
		return errors.New("want -rounds >= 1 and -warmup >= 0")
	}
	work, err := os.MkdirTemp("", "startbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if bin == "" {
		bin = filepath.Join(work, "hermetic")
		build := exec.Command("go", "build", "-o", bin, "./cmd/hermetic")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building hermetic: %w", err)
		}
	}
	// The floor any Go program pays on this machine: runtime start-up with
	// nothing but fmt linked in.
	hello := filepath.Join(work, "hello")
	if err := os.WriteFile(hello+".go", []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Print() }\n"), 0o600); err != nil {
		return err
	}
	build := exec.Command("go", "build", "-o", hello, hello+".go")
	build.Dir, build.Stdout, build.Stderr = work, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the Go hello-world: %w", err)
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		return err
	}
	// The commands run in an empty directory with a private TMPDIR and no
	// HERMETIC_* settings, so no config file is found and every temporary
	// file hermetic leaves would show.
	dir := filepath.Join(work, "cwd")
	tmp := filepath.Join(work, "tmp")
	for _, d := range []string{dir, tmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + work, "TMPDIR=" + tmp}

	cmds := []*command{
		{label: "true", argv: []string{truePath}},
		{label: "Go hello-world (any Go program)", argv: []string{hello}},
		{label: "hermetic version", argv: []string{bin, "version"}},
		{label: "hermetic -- true", argv: []string{bin, "--", truePath}},
		{label: "hermetic --no-network --isolate=none -- true", argv: []string{bin, "--no-network", "--isolate=none", "--", truePath}},
		{label: "hermetic --no-network --isolate=netns -- true", argv: []string{bin, "--no-network", "--isolate=netns", "--", truePath}},
	}
	none, netns := cmds[len(cmds)-2], cmds[len(cmds)-1]
	for i := range warmup + rounds {
		// Rotate the order so no command always runs right after another.
		for j := range cmds {
			c := cmds[(i+j)%len(cmds)]
			d, err := timeRun(c.argv, env, dir)
			if err != nil {
				return fmt.Errorf("%s: %w", c.label, err)
			}
			if i >= warmup {
				c.times = append(c.times, d)
			}
		}
	}
	if ents, err := os.ReadDir(tmp); err != nil || len(ents) > 0 {
		return fmt.Errorf("hermetic left files in TMPDIR: %v %v", ents, err)
	}

	base := stats(cmds[0].times)
	fmt.Printf("start-up: %d rounds, interleaved, after %d warm-up rounds\n", rounds, warmup)
	fmt.Printf("%-46s %9s %9s %9s %10s %8s\n", "command", "median", "p90", "mean", "added", "ratio")
	for _, c := range cmds {
		s := stats(c.times)
		added, ratio := "", ""
		if c != cmds[0] {
			added = fmt.Sprintf("%+.2f ms", ms(s.median-base.median))
			ratio = fmt.Sprintf("%.2fx", float64(s.median)/float64(base.median))
		}
		fmt.Printf("%-46s %6.2f ms %6.2f ms %6.2f ms %10s %8s\n", c.label, ms(s.median), ms(s.p90), ms(s.mean), added, ratio)
	}
	verdict := func(added, target float64) string {
		if added >= target {
			return "OVER"
		}
		return "within"
	}
	ns := stats(none.times)
	added := ms(ns.median - base.median)
	fmt.Printf("start-up overhead: %.2f ms added (median), %.2fx true; target < %.0f ms: %s\n",
		added, float64(ns.median)/float64(base.median), targetMS, verdict(added, targetMS))
	// Paired by round: each round ran both, so the median of the
	// differences is less noisy than the difference of the medians.
	diffs := make([]time.Duration, len(netns.times))
	for i := range diffs {
		diffs[i] = netns.times[i] - none.times[i]
	}
	nsAdded := ms(stats(diffs).median)
	fmt.Printf("network namespace: %.2f ms added over --isolate=none (median of paired rounds); target < %.0f ms: %s\n",
		nsAdded, netnsTargetMS, verdict(nsAdded, netnsTargetMS))
	return nil
}

func timeRun(argv, env []string, dir string) (time.Duration, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	return d, nil
}

type summary struct{ median, p90, mean time.Duration }

func stats(ds []time.Duration) summary {
	s := slices.Clone(ds)
	slices.SortFunc(s, cmp.Compare)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return summary{median: s[len(s)/2], p90: s[len(s)*9/10], mean: sum / time.Duration(len(s))}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
