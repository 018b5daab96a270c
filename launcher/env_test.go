package launcher

import (
	"slices"
	"strings"
	"testing"
)

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := m[k]; dup {
			panic("duplicate " + k)
		}
		m[k] = v
	}
	return m
}

func TestBuildEnvProxy(t *testing.T) {
	base := []string{
		"PATH=/usr/bin",
		"HTTP_PROXY=http://corp:3128", "https_proxy=http://corp:3128", "Http_Proxy=x",
		"NO_PROXY=.internal.corp,10.0.0.0/8", "no_proxy=*",
		"npm_config_noproxy=x", "FTP_PROXY=ftp://corp", "GIT_PROXY_COMMAND=nc", "GIT_SSH_COMMAND=ssh -i key",
		"SOCKS5_SERVER=corp:1080", "PYTHONPATH=/mine", "GIT_CONFIG_PARAMETERS='http.proxy'='http://corp:3128'",
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=user.name", "GIT_CONFIG_VALUE_0=me",
		"HOME=/home/u",
	}
	p := &proxyEnv{HTTP: "http://127.0.0.1:1000", SOCKS: "socks5h://127.0.0.1:2000", GitSSH: "ssh -o x", GitProxy: "/tmp/h/git-proxy"}
	env, _ := buildEnv(envSpec{Base: base, Proxy: p, ShimDir: "/tmp/h", ShimVar: "HERMETIC_SHIM", ShimValue: "{}"})
	m := envMap(env)
	want := map[string]string{
		"PATH": "/usr/bin", "HOME": "/home/u",
		"HTTP_PROXY": p.HTTP, "http_proxy": p.HTTP, "HTTPS_PROXY": p.HTTP, "https_proxy": p.HTTP,
		"ALL_PROXY": p.SOCKS, "all_proxy": p.SOCKS,
		"NO_PROXY": loopbackNoProxy, "no_proxy": loopbackNoProxy,
		"NODE_USE_ENV_PROXY": "1", "GIT_SSH_COMMAND": "ssh -o x", "GIT_PROXY_COMMAND": "/tmp/h/git-proxy",
		"PIP_PROXY": p.HTTP, "npm_config_proxy": p.HTTP, "npm_config_https_proxy": p.HTTP,
		"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "me",
		"GIT_CONFIG_KEY_1": "http.proxy", "GIT_CONFIG_VALUE_1": p.HTTP,
		"PYTHONPATH": "/tmp/h:/mine", "HERMETIC_SHIM": "{}",
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %q, want %q", k, m[k], v)
		}
	}
	for k := range m {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected variable %s=%q (inherited proxy settings must be dropped)", k, m[k])
		}
	}
}

func TestBuildEnvNoNetworkLeavesProxiesAlone(t *testing.T) {
	base := []string{"HTTPS_PROXY=http://corp:3128", "NO_PROXY=x"}
	env, _ := buildEnv(envSpec{Base: base})
	if !slices.Equal(env, base) {
		t.Errorf("env = %q, want %q", env, base)
	}
}

func TestBuildEnvScrub(t *testing.T) {
	base := []string{
		"GITHUB_TOKEN=t", "my_secret=s", "DB_PASSWORD=p", "OPENAI_API_KEY=k", "AWS_REGION=r",
		"AWS_SECRET_ACCESS_KEY=x", "KEYBOARD=us", "HOME=/h", "PATH=/bin", "MONKEY=m", "SSH_AUTH_SOCK=/s",
		"KEEP_TOKEN=1", "CI_JOB_TOKEN=2",
	}
	env, scrubbed := buildEnv(envSpec{Base: base, Scrub: true, Keep: []string{"KEEP_TOKEN", "CI_*"}})
	m := envMap(env)
	for _, gone := range []string{"GITHUB_TOKEN", "my_secret", "DB_PASSWORD", "OPENAI_API_KEY", "AWS_REGION", "AWS_SECRET_ACCESS_KEY"} {
		if _, ok := m[gone]; ok {
			t.Errorf("%s not scrubbed", gone)
		}
		if !slices.Contains(scrubbed, gone) {
			t.Errorf("%s not reported as scrubbed", gone)
		}
	}
	for _, kept := range []string{"KEYBOARD", "HOME", "PATH", "MONKEY", "SSH_AUTH_SOCK", "KEEP_TOKEN", "CI_JOB_TOKEN"} {
		if _, ok := m[kept]; !ok {
			t.Errorf("%s scrubbed", kept)
		}
	}
}

func TestBuildEnvGitConfigCount(t *testing.T) {
	for _, bad := range []string{"x", "-1", "99999999"} {
		env, _ := buildEnv(envSpec{Base: []string{"GIT_CONFIG_COUNT=" + bad}, Proxy: &proxyEnv{HTTP: "http://127.0.0.1:1"}})
		m := envMap(env)
		if m["GIT_CONFIG_COUNT"] != "1" || m["GIT_CONFIG_KEY_0"] != "http.proxy" {
			t.Errorf("GIT_CONFIG_COUNT=%s: got %v", bad, m)
		}
	}
}
