package main

import (
	"fmt"
	"io"

	"github.com/throttlekit/throttlekit-server/config"
	"github.com/throttlekit/throttlekit-server/telemetry"
)

// modesHelp is appended to the flag list of --help: the modes other than
// serving, chosen by the first argument.
const modesHelp = `
Modes:
  throttlekit-server healthcheck [flags]
        probe /healthz on the --metrics-addr the same flags, environment and
        config file give the server (an unspecified host means loopback); exit
        0 when it answers 200 and 1 otherwise, including for a bad setting,
        for a container HEALTHCHECK in an image without curl
`

// healthcheck is the "throttlekit-server healthcheck [flags]" mode: it
// loads the configuration the server would load from args and getenv (so it
// follows THROTTLEKIT_METRICS_ADDR), probes telemetry.HealthURL(MetricsAddr)
// and returns 0 when /healthz answers 200, 1 otherwise, including for a bad
// configuration (Docker reserves status 2). --help and --version return 0.
func healthcheck(args []string, getenv func(string) string, stderr io.Writer) int {
	cfg, err := config.Load(args, getenv, stderr)
	if err != nil {
		if config.Exit(err, stderr) == 0 {
			return 0 // --help or --version
		}
		return 1
	}
	url, err := telemetry.HealthURL(cfg.MetricsAddr)
	if err != nil {
		fmt.Fprintf(stderr, "healthcheck: %v\n", err)
		return 1
	}
	return telemetry.HealthCheck(url, stderr)
}
