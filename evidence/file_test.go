package evidence_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
)

func TestReadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"a":[1]}`)
	dup := write("dup.json", `{"a":1,"a":2}`)
	big := write("big.json", strings.Repeat(" ", evidence.MaxSize)+"0")
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}

	if v, err := evidence.ReadFile(good); err != nil || v.(*evidence.Object).Len() != 1 {
		t.Errorf("ReadFile(good) = %v, %v", v, err)
	}
	tests := []struct {
		name    string
		path    string
		class   evidence.Class // "" for an I/O problem, not a refusal
		ioErr   error          // the I/O problem, when class is ""
		message string
	}{
		{"refused", dup, evidence.ClassDuplicateName, nil, "dup.json: evidence: duplicate-name at offset 7"},
		{"too-large-by-fstat", big, evidence.ClassTooLarge, nil, "big.json: evidence: too-large at offset 8388608"},
		// A FIFO is refused without blocking on open.
		{"fifo", fifo, "", evidence.ErrNotRegular, "fifo: not a regular file"},
		{"directory", dir, "", evidence.ErrNotRegular, "not a regular file"},
		{"missing", filepath.Join(dir, "absent.json"), "", fs.ErrNotExist, "absent.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := evidence.ReadFile(tt.path)
			if err == nil {
				t.Fatal("accepted")
			}
			if tt.class != "" && !errors.Is(err, tt.class) {
				t.Errorf("err %v is not %s", err, tt.class)
			}
			if tt.ioErr != nil && !errors.Is(err, tt.ioErr) {
				t.Errorf("err %v is not %v", err, tt.ioErr)
			}
			// A refusal of the bytes exits 1; a file that cannot be read, 2.
			want := fault.Unusable
			if tt.class != "" {
				want = fault.Refused
			}
			if got := fault.ClassOf(err); got != want {
				t.Errorf("fault.ClassOf(%v) = %v, want %v", err, got, want)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("message %q lacks %q", err, tt.message)
			}
		})
	}
}

// ReadRegularFile reads a regular file up to its limit and refuses, by
// rule and naming the file, a longer one and anything not a regular file,
// without waiting on a FIFO.
func TestReadRegularFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := evidence.ReadRegularFile(ok, 5); err != nil || string(b) != "12345" {
		t.Errorf("at the limit: %q, %v", b, err)
	}
	for _, tc := range []struct {
		name, path string
		max        int64
		want       error
	}{
		{"over the limit", ok, 4, evidence.ErrFileTooLarge},
		{"fifo", fifo, 5, evidence.ErrNotRegular},
		{"directory", dir, 5, evidence.ErrNotRegular},
		{"device", "/dev/zero", 5, evidence.ErrNotRegular},
		{"absent", filepath.Join(dir, "absent"), 5, fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := evidence.ReadRegularFile(tc.path, tc.max)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.path) {
				t.Errorf("got %v, want %v naming %s", err, tc.want, tc.path)
			}
		})
	}
}
