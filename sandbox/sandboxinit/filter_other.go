//go:build !amd64 && !arm64

package sandboxinit

// No candidate filter for this architecture: the container's init refuses
// to start the command (abisFor fails).
const (
	nativeArch = 0
	x32Bit     = 0
)

var allowedArch []uint32
