package launcher

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/hermetic-dev/hermetic/launcher/pyshim"
	"github.com/hermetic-dev/hermetic/policy"
)

// shimSettings is the JSON the Python shim reads from its variable.
type shimSettings struct {
	Network      *shimNetwork `json:"network,omitempty"`
	NoSubprocess bool         `json:"no_subprocess,omitempty"`
	BlockNative  bool         `json:"block_native,omitempty"`
	Seal         bool         `json:"seal,omitempty"`
	Trace        bool         `json:"trace,omitempty"`
	FSReadonly   bool         `json:"fs_readonly,omitempty"`
	FSRoot       string       `json:"fs_root,omitempty"`
	TargetScript string       `json:"target_script,omitempty"`
	ReportFile   string       `json:"report_file,omitempty"`
	// CacheDir keeps the shim's compiled code between runs: compiling it
	// costs more than the rest of Python's start-up. Entries are keyed by
	// the interpreter's magic number and a hash of the source.
	CacheDir string `json:"cache_dir,omitempty"`
}

type shimNetwork struct {
	Posture        string              `json:"posture"`
	Allow          []string            `json:"allow"`
	Deny           []string            `json:"deny"`
	AllowLocalhost bool                `json:"allow_localhost,omitempty"`
	SOCKS          string              `json:"socks,omitempty"`
	HTTP           string              `json:"http,omitempty"`
	Resolve        map[string][]string `json:"resolve,omitempty"`
	// SOCKSUser and SOCKSPassword are the run's proxy credentials, which
	// the shim's SOCKS5 client sends (RFC 1929). The settings variable is
	// in the target's environment, which other users cannot read (argv
	// they can), and the shim never prints them.
	SOCKSUser     string `json:"socks_user,omitempty"`
	SOCKSPassword string `json:"socks_password,omitempty"`
}

// reportName is the file in the run's directory where the shim appends
// one JSON line per blocked action, for --fail-on-block and the summary.
const reportName = "violations.jsonl"

// shimConfig is what the Python shim is told about the run.
func (r *runner) shimConfig(netOn bool) shimSettings {
	g := r.s.Guards
	s := shimSettings{
		NoSubprocess: g.NoSubprocess,
		BlockNative:  g.BlockNative,
		Seal:         g.Seal,
		Trace:        r.s.Trace,
		FSReadonly:   g.FSReadonly,
		FSRoot:       g.FSRoot,
		TargetScript: r.targetScript(),
		ReportFile:   filepath.Join(r.tmp, reportName),
	}
	if g.FSReadonly && s.FSRoot == "" {
		s.FSRoot = r.dir
	}
	if netOn && r.pol != nil {
		n := &shimNetwork{
			Posture:        r.pol.Posture().String(),
			AllowLocalhost: r.s.Net.AllowLocalhost,
			SOCKS:          r.sockAddr.String(),
			HTTP:           r.httpAddr.String(),
		}
		if r.creds.Enabled() {
			n.SOCKSUser, n.SOCKSPassword = r.creds.User, r.creds.Password
		}
		c := r.s.Net
		n.Allow = append(append(append([]string{}, c.AllowDomains...), c.AllowCIDRs...), c.Allow...)
		n.Deny = append(append(append([]string{}, c.DenyDomains...), c.DenyCIDRs...), c.Deny...)
		if r.pol.Audit() {
			// The shim has no report-only mode: under --audit it lets
			// Python connect and the proxies judge (and log) what goes
			// through them.
			n.Posture, n.Allow, n.Deny = policy.PostureOpen.String(), nil, nil
		}
		if table, err := parseResolve(r.s.Resolve); err == nil && len(table) > 0 {
			n.Resolve = map[string][]string{}
			for name, addrs := range table {
				for _, a := range addrs {
					n.Resolve[name] = append(n.Resolve[name], a.String())
				}
			}
		}
		s.Network = n
	}
	return s
}

// targetScript is the Python script the target runs, whose reads
// --fs-readonly must allow: a console script, or the script argument of
// `python3 script.py`.
func (r *runner) targetScript() string {
	t := r.target
	if t.Python == nil || t.Kind != TargetExecutable {
		return ""
	}
	if t.Path != t.Python[0] {
		return t.Path // a script run through its shebang
	}
	args := t.Argv[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-c" || a == "-m" || a == "-":
			return ""
		case a == "-W" || a == "-X":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			if !filepath.IsAbs(a) {
				a = filepath.Join(r.dir, a)
			}
			return a
		}
	}
	return ""
}

// shimVar carries the shim's settings to every Python the target starts.
const shimVar = "HERMETIC_SHIM"

// installShim writes the shim into dir (the run's private directory, which
// the launcher puts first on PYTHONPATH and removes at exit) and returns
// the variable that carries its settings.
func installShim(dir string, s shimSettings) (name, value string, err error) {
	if dir == "" {
		return "", "", errors.New("no directory for the shim")
	}
	if err := pyshim.Install(dir); err != nil {
		return "", "", err
	}
	if s.CacheDir == "" {
		s.CacheDir = shimCacheDir()
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "", "", err
	}
	return shimVar, string(b), nil
}

// shimCacheDir is where the shim keeps compiled code, or "" for nowhere.
// The shim itself refuses a directory that is not the user's own or that
// others can write.
func shimCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil || !filepath.IsAbs(d) {
		return ""
	}
	return filepath.Join(d, "hermetic", "pyc")
}

// violation is one line of the shim's report file.
type violation struct {
	Guard  string `json:"guard"`
	Target string `json:"target"`
	Reason string `json:"reason"`
}

// readViolations reads the blocked actions the shim reported.
func readViolations(dir string) []violation {
	if dir == "" {
		return nil
	}
	f, err := os.Open(filepath.Join(dir, reportName))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []violation
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() && len(out) < 100000 {
		var v violation
		if json.Unmarshal(sc.Bytes(), &v) == nil && v.Guard != "" {
			out = append(out, v)
		}
	}
	return out
}
