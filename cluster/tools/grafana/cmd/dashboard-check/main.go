// Command dashboard-check checks Grafana dashboard JSON files against the dashboard schema
// of the Grafana Foundation SDK: each file is unmarshalled strictly into its
// dashboard.Dashboard (a field of the wrong type, an unknown field or a missing required
// one is an error) and validated. With the SDK's panel and data source plugins
// registered, the options and field config of known panel types and the targets of
// known data sources (Prometheus among them) are checked strictly too; those of unknown
// ones are taken as they are.
//
// It prints "<file>: ok", or "<file>: <error>" once per error, and exits 1 when any file
// fails (2 on a usage error). --version prints the SDK version it was built with.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

const sdkModule = "github.com/grafana/grafana-foundation-sdk/go"

func main() {
	args := os.Args[1:]
	if len(args) == 1 && args[0] == "--version" {
		fmt.Println("dashboard-check", sdkModule, sdkVersion())
		return
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(os.Stderr, "usage: dashboard-check DASHBOARD.json... | --version")
		os.Exit(2)
	}
	plugins.RegisterDefaultPlugins()
	failed := false
	for _, path := range args {
		err := check(path)
		if err == nil {
			fmt.Printf("%s: ok\n", path)
			continue
		}
		failed = true
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Printf("%s: %s\n", path, line)
		}
	}
	if failed {
		os.Exit(1)
	}
}

func check(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var board dashboard.Dashboard
	if err := board.UnmarshalJSONStrict(raw); nonEmpty(err) != nil {
		return err
	}
	return board.Validate()
}

// nonEmpty is err, or nil for the empty error list UnmarshalJSONStrict returns on
// success (a nil cog.BuildErrors, which is a non-nil error).
func nonEmpty(err error) error {
	var list cog.BuildErrors
	if errors.As(err, &list) && len(list) == 0 {
		return nil
	}
	return err
}

func sdkVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == sdkModule {
				return dep.Version
			}
		}
	}
	return "unknown"
}
