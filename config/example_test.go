package config_test

import (
	"fmt"
	"io"
	"os"

	"github.com/throttlekit/throttlekit-server/config"
)

// A flag beats the environment, which beats the configuration file and the
// defaults.
func ExampleLoad() {
	env := map[string]string{
		"THROTTLEKIT_MAXCLIENTS": "500",
		"THROTTLEKIT_TIMEOUT":    "30",
		"THROTTLEKIT_LOG_FORMAT": "json",
	}
	cfg, err := config.Load([]string{"--maxclients", "100", "--proto-max-bulk-len=1mb"},
		func(k string) string { return env[k] }, os.Stdout)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.MaxClients, cfg.Timeout, cfg.LogFormat, cfg.ProtoMaxBulkLen, cfg.Addr)
	// Output: 100 30s json 1048576 127.0.0.1:6380
}

// Exit turns the result of Load into the process's exit status.
func ExampleExit() {
	_, err := config.Load([]string{"--log-level", "loud"}, nil, io.Discard)
	code := config.Exit(err, os.Stdout)
	fmt.Println("exit status", code)
	// Output:
	// throttlekit-server: invalid value "loud" for log-level (flag --log-level): must be one of debug, info, warn, error
	// exit status 2
}

// ConfigGet answers CONFIG GET: a glob over the setting names, values in
// Redis's units (bytes, whole seconds), the password never shown.
func ExampleConfig_ConfigGet() {
	cfg, err := config.Load([]string{"--timeout", "5m", "--requirepass", "secret"}, nil, io.Discard)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, kv := range cfg.ConfigGet("*TIMEOUT*") {
		fmt.Println(kv[0], kv[1])
	}
	for _, kv := range cfg.ConfigGet("proto-max-*") {
		fmt.Println(kv[0], kv[1])
	}
	fmt.Println(len(cfg.ConfigGet("requirepass")))
	// Output:
	// shutdown-timeout 10s
	// timeout 300
	// upstream-timeout 1s
	// proto-max-bulk-len 67108864
	// 0
}
