// Command cleanroom-room is the clean room's sealed server: the two stages
// `cleanroom room serve` starts in fresh mount and network namespaces (seal:
// mount, emit, seal read-only, assert; serve: drop every privilege, verify
// the view, serve it over MCP on stdio). It is not run by hand.
//
// It links the harness and what the stages need, nothing of the command
// line (no container runtime, no cgo), so each stage starts sooner and the
// serving process keeps fewer of its binary's pages resident. `make build`
// builds it beside bin/cleanroom and links its Go build ID into cleanroom,
// which uses it only when the build IDs match and otherwise runs the same
// stages from its own binary (harness.OpenStage).
package main

import (
	"fmt"
	"os"

	"github.com/cleanroom-dev/cleanroom/harness"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "cleanroom-room is the clean room's sealed server, started by `cleanroom room serve`; it is not run by hand")
		os.Exit(2)
	}
	os.Exit(harness.RunStage(nil, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
