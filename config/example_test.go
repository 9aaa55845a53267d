package config_test

import (
	"fmt"

	"github.com/schedulerd/schedulerd/config"
)

func ExampleParse() {
	cfg, err := config.Parse("schedulerd.toml", []byte(`
[daemon]
node_id = "node-a"

[defaults]
timeout = "30m"
retry = { max_attempts = 5 }

[[job]]
name = "backup"
schedule = "0 3 * * *"
timezone = "Europe/Berlin"
command = ["/usr/local/bin/backup", "--full"]
retry = { initial_delay = "1m" }

[[job]]
name = "reindex"
shell = "reindex --all"
timeout = "2h"
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, j := range cfg.Jobs {
		fmt.Println(j.Name, j.Kind(), j.Timeout, j.Retry.MaxAttempts, j.Retry.InitialDelay)
	}
	// Output:
	// backup cron 30m0s 5 1m0s
	// reindex trigger 2h0m0s 5 5s
}

func ExampleParse_errors() {
	_, err := config.Parse("schedulerd.toml", []byte(`
[[job]]
name = "backup"
schedule = "0 3 * * *"
command = ["/usr/local/bin/backup"]
timeout = 7200
retry = { max_attempts = 0, backof = "fixed" }
`))
	fmt.Println(err)
	// Output:
	// schedulerd.toml:6: job "backup": timeout: a bare number (7200) is not a duration; use a string such as "90s"
	// schedulerd.toml:7: job "backup": retry.backof: unknown key; did you mean backoff?
	// schedulerd.toml:7: job "backup": retry.max_attempts: must be between 1 and 1000, got 0
}
