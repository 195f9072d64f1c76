package roomstage

import (
	"os"

	"github.com/cleanroom-dev/cleanroom/harness"
)

// Args is the hidden command line (argv[1:3]) that makes the binary run a
// sealed stage; harness.ServeOptions.StageArgs for this binary.
var Args = []string{"room", "sealed-stage"}

func init() {
	if len(os.Args) > len(Args) && os.Args[1] == Args[0] && os.Args[2] == Args[1] {
		os.Exit(harness.RunStage(Args, os.Args[len(Args)+1:], os.Stdin, os.Stdout, os.Stderr))
	}
}
