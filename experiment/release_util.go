package experiment

import (
	"fmt"
	"io"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

const (
	syscallNoFollow = unix.O_NOFOLLOW
	syscallNonBlock = unix.O_NONBLOCK
)

// readAllLimited reads at most limit bytes and refuses a longer input (read
// through a limit of limit+1 so growth is seen, not truncated).
func readAllLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}

func slicesSortUTF16(s []string) { slices.SortFunc(s, evidence.CompareUTF16) }
