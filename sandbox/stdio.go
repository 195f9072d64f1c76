package sandbox

import (
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/term"
)

// DefaultOutputLimit is how many bytes of each of stdout and stderr Exec
// copies when Stdio.Limit is zero; the rest is read and dropped.
const DefaultOutputLimit = 256 << 20

// streams are the candidate's standard streams: pipes this process owns
// at both ends, never a descriptor of the caller's. A descriptor the
// caller passed straight through (a shell's `< /`, `2>>log`) would give
// the candidate the host file behind it: through /proc/self/fd/N it reads
// /etc/shadow beneath a directory, reopens a log for writing, truncates it.
type streams struct {
	stdin, stdout, stderr *os.File // the candidate's ends (nil stdin: /dev/null)
	ours                  []*os.File
	wg                    sync.WaitGroup
	mu                    sync.Mutex
	truncated             []string
}

// newStreams makes the pipes and starts the copies: stdin from Stdin
// into the candidate's pipe, the candidate's stdout and stderr into
// Stdout and Stderr, each bounded by limit bytes, and with terminal
// control sequences neutralised when the destination is a terminal.
func newStreams(sio Stdio) (*streams, error) {
	s := &streams{}
	limit := sio.Limit
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	if sio.Stdin != nil {
		r, w, err := pipe()
		if err != nil {
			return nil, err
		}
		s.stdin = r
		// Not waited for: a caller's stdin that never ends (a terminal, a
		// pipe kept open) must not hold Exec after the candidate is gone;
		// the copy ends at the next write into the closed pipe.
		go func() {
			_, _ = copyStdin(w, sio.Stdin)
			w.Close()
		}()
	}
	var err error
	if s.stdout, err = s.out("stdout", sio.Stdout, limit); err != nil {
		s.close()
		return nil, err
	}
	if s.stderr, err = s.out("stderr", sio.Stderr, limit); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func pipe() (*os.File, *os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("candidate streams: %w", err)
	}
	return r, w, nil
}

// copyStdin copies until either side fails; a read error of the caller's
// stream (a directory: EISDIR) ends the candidate's stdin, nothing more.
func copyStdin(w io.Writer, r io.Reader) (int64, error) {
	buf := make([]byte, 32<<10)
	return io.CopyBuffer(w, r, buf)
}

// out starts the copy of one output stream and returns the candidate's
// end.
func (s *streams) out(name string, dst io.Writer, limit int64) (*os.File, error) {
	if dst == nil {
		dst = io.Discard
	}
	if f, ok := dst.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		// Escape sequences could rewrite what the operator sees, set the
		// window title, or on some terminals answer back as typed input.
		dst = &controlEscaper{w: f}
	}
	r, w, err := pipe()
	if err != nil {
		return nil, err
	}
	s.ours = append(s.ours, r)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		n, _ := io.CopyBuffer(dst, io.LimitReader(r, limit), make([]byte, 32<<10))
		if esc, ok := dst.(*controlEscaper); ok && esc.pending {
			_, _ = esc.w.Write([]byte{0xc2})
		}
		if n == limit {
			// Keep draining so the candidate never blocks on a full pipe
			// (its exit status is its own), and say so.
			if m, _ := io.Copy(io.Discard, r); m > 0 {
				s.mu.Lock()
				s.truncated = append(s.truncated, name)
				s.mu.Unlock()
			}
		}
	}()
	return w, nil
}

// started closes this process's copies of the candidate's ends once the
// container holds its own: the output copies then end when the last
// process of the candidate does.
func (s *streams) started() {
	for _, f := range []*os.File{s.stdin, s.stdout, s.stderr} {
		if f != nil {
			f.Close()
		}
	}
}

// wait returns once both output copies have ended, and the names of the
// streams cut at the limit.
func (s *streams) wait() []string {
	s.started()
	s.wg.Wait()
	s.close()
	return s.truncated
}

func (s *streams) close() {
	s.started()
	for _, f := range s.ours {
		f.Close()
	}
}

// controlEscaper writes C0 controls other than tab, newline and carriage
// return, DEL, and the UTF-8 encodings of C1 controls as visible text
// (^[ , \u009b): a candidate's output shown on the operator's terminal
// cannot drive it.
type controlEscaper struct {
	w       io.Writer
	pending bool // the previous write ended with 0xC2, a possible C1 lead byte
}

func (e *controlEscaper) Write(p []byte) (int, error) {
	out := make([]byte, 0, len(p)+8)
	i := 0
	if e.pending {
		e.pending = false
		if len(p) > 0 && p[0] >= 0x80 && p[0] <= 0x9f {
			out = fmt.Appendf(out, "\\u%04x", p[0])
			i = 1
		} else {
			out = append(out, 0xc2)
		}
	}
	for ; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\t' || c == '\n' || c == '\r':
			out = append(out, c)
		case c < 0x20:
			out = append(out, '^', c+0x40)
		case c == 0x7f:
			out = append(out, '^', '?')
		case c == 0xc2 && i+1 == len(p):
			e.pending = true
		case c == 0xc2 && p[i+1] >= 0x80 && p[i+1] <= 0x9f:
			out = fmt.Appendf(out, "\\u%04x", p[i+1])
			i++
		default:
			out = append(out, c)
		}
	}
	if _, err := e.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
