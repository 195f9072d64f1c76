package earlyprime

import (
	"os"
	"time"

	"github.com/cleanroom-dev/cleanroom/sandbox/cgprime"
)

func init() {
	if len(os.Args) > 2 && os.Args[1] == "sandbox" && os.Args[2] == "exec" {
		// sandbox.Exec's own priming takes over and ends it; the limit
		// ends it when the command is refused before any container.
		cgprime.Early(2 * time.Second)
	}
}
