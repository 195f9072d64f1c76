package testshared

import (
	"os"
	"testing"
)

// ClosesNothingElse calls again (a second release, a second end of
// something already let go) while files of its own fill the lowest free
// descriptor numbers, the one the first call freed among them, and fails
// tb if again closed any of them: a second close of a bare descriptor
// number closes whatever another goroutine opened under it since.
func ClosesNothingElse(tb testing.TB, again func()) {
	tb.Helper()
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for range 64 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			tb.Fatal(err)
		}
		files = append(files, f)
	}
	again()
	for _, f := range files {
		if _, err := f.Stat(); err != nil {
			tb.Fatalf("a second call closed another's descriptor: %v", err)
		}
	}
}
