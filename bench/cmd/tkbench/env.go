package main

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// envInfo describes the machine and the software measured.
type envInfo struct {
	cpu, kernel, mem  string
	cores             int
	goVersion         string
	redisVersion      string
	redisBenchVersion string
	tkVersion         string
	commit            string
}

func collectEnv(ctx context.Context, root, redisBin, tkBin string) envInfo {
	e := envInfo{cores: runtime.NumCPU(), goVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				e.cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		e.kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		l, _, _ := strings.Cut(string(b), "\n")
		e.mem = strings.Join(strings.Fields(strings.TrimPrefix(l, "MemTotal:")), " ")
	}
	out := func(dir, name string, args ...string) string {
		c := exec.CommandContext(ctx, name, args...)
		c.Dir = dir
		b, err := c.Output()
		if err != nil {
			return "unknown (" + err.Error() + ")"
		}
		return strings.TrimSpace(string(b))
	}
	e.redisVersion = out("", redisBin, "--version")
	e.redisBenchVersion = out("", "redis-benchmark", "--version")
	if tkBin != "" {
		e.tkVersion = out("", tkBin, "--version")
	}
	e.commit = out(root, "git", "rev-parse", "--short", "HEAD")
	if s := out(root, "git", "status", "--porcelain", "--untracked-files=no"); s != "" && !strings.HasPrefix(s, "unknown") {
		e.commit += " (with uncommitted changes)"
	}
	return e
}
