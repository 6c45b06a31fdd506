package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set at build time, e.g.
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.commit=$(git rev-parse HEAD) -X main.date=$(date -u +%FT%TZ)"
//
// What is left empty is taken from the build information the go command
// records (module version, vcs.revision, vcs.time, vcs.modified).
var version, commit, date string

// build describes this binary: `instore version` prints it.
type build struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// currentBuild is this binary's build: the -ldflags values, completed from
// debug.ReadBuildInfo.
func currentBuild() build {
	bi, _ := debug.ReadBuildInfo()
	return readBuild(version, commit, date, bi)
}

// readBuild prefers the values given by -ldflags -X (ldVersion, ldCommit,
// ldDate) and fills the others from bi (nil when the binary has none): the
// main module's version, vcs.revision with "-dirty" when vcs.modified, and
// vcs.time. What neither knows is "unknown" (version "dev").
func readBuild(ldVersion, ldCommit, ldDate string, bi *debug.BuildInfo) build {
	b := build{Version: ldVersion, Commit: ldCommit, Date: ldDate,
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		var revision, modified, vcsTime string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value
			case "vcs.time":
				vcsTime = s.Value
			}
		}
		if b.Commit == "" && revision != "" {
			b.Commit = revision
			if modified == "true" {
				b.Commit += "-dirty"
			}
		}
		if b.Date == "" {
			b.Date = vcsTime
		}
		if bi.GoVersion != "" {
			b.GoVersion = bi.GoVersion
		}
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	if b.Date == "" {
		b.Date = "unknown"
	}
	return b
}

// String is the line `instore version` and `instore --version` print.
func (b build) String() string {
	return fmt.Sprintf("instore %s (commit %s, built %s, %s %s)", b.Version, b.Commit, b.Date, b.GoVersion, b.Platform)
}

// versionString is the version line, also logged at start.
func versionString() string { return currentBuild().String() }

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b := currentBuild()
			if asJSON {
				j, _ := json.Marshal(b)
				fmt.Fprintf(cmd.OutOrStdout(), "%s\n", j)
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), b)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object: version, commit, date, goVersion, platform")
	return cmd
}
