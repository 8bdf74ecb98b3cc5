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
		func(k string) string { return env[k] })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.MaxClients, cfg.Timeout, cfg.LogFormat, cfg.ProtoMaxBulkLen, cfg.Addr)
	// Output: 100 30s json 1048576 127.0.0.1:6380
}

// Exit turns the result of Load into the process's exit status.
func ExampleExit() {
	_, err := config.LoadTo([]string{"--log-level", "loud"}, nil, io.Discard)
	code := config.Exit(err, os.Stdout)
	fmt.Println("exit status", code)
	// Output:
	// throttlekit-server: invalid value "loud" for log-level (flag --log-level): must be one of debug, info, warn, error
	// exit status 2
}
