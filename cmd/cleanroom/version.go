package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/cleanroom-dev/cleanroom/harness"
	"github.com/spf13/cobra"
)

// buildVersion is what `cleanroom version` reports, read from the build
// information the Go toolchain embeds in the binary.
type buildVersion struct {
	Module    string `json:"module"`
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	Time      string `json:"revision_time"`
	Modified  bool   `json:"modified"`
	GoVersion string `json:"go_version"`
	// RoomStage is the program `room serve` runs the sealed stages in: the
	// room binary beside this one (its path), or "built in" and why.
	RoomStage string `json:"room_stage"`
}

// readBuildVersion reads the module version and the VCS stamp. A binary
// built outside a checkout (or with -buildvcs=false) has no revision: it
// says "unknown" rather than guessing.
func readBuildVersion() buildVersion {
	v := buildVersion{Module: "github.com/cleanroom-dev/cleanroom", Version: "unknown", Revision: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.GoVersion = bi.GoVersion
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// roomStage is buildVersion.RoomStage: it opens and checks the room binary
// (its ELF build ID read), so only `version` asks, not every reader of the
// build stamp (man reads it twice).
func roomStage() string {
	f, err := harness.OpenStage()
	if err != nil {
		return "built in (" + err.Error() + ")"
	}
	defer f.Close()
	return f.Name()
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the module version and the VCS revision the binary was built from",
		Long: `version prints the module path and version, the VCS revision and its time,
whether the working tree had uncommitted changes (modified), and the Go
version, as the Go toolchain stamped them into the binary
(runtime/debug.ReadBuildInfo). A binary built outside a git checkout, or
with -buildvcs=false, reports the revision as "unknown"; "go run" and test
binaries report the version "(devel)".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := readBuildVersion()
			v.RoomStage = roomStage()
			return printResult(cmd, v, func(w io.Writer) {
				rev := v.Revision
				if v.Modified {
					rev += " (modified)"
				}
				fmt.Fprintf(w, "cleanroom %s\nmodule   %s\nrevision %s\n", v.Version, v.Module, rev)
				if v.Time != "" {
					fmt.Fprintf(w, "time     %s\n", v.Time)
				}
				fmt.Fprintf(w, "go       %s\nroom     %s\n", v.GoVersion, v.RoomStage)
			})
		},
	}
}
