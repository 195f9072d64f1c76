package pkgwalk

import (
	"encoding/hex"
	"fmt"

	"github.com/cleanroom-dev/cleanroom/pkgwalk/internal/sha2x"
	"golang.org/x/sys/unix"
)

// laneBytes is how much of one file a lane reads at a time: the two lanes'
// buffers stay in the core's L2 cache between the read and the hashing.
const laneBytes = 128 << 10

// lane is one file being read and hashed by a pair worker.
type lane struct {
	active bool
	path   string
	fd     int
	size   int64 // what fstat said
	read   int64 // bytes read so far, at most size+1
	eof    bool  // a short read was seen, or size+1 bytes were read
	st     sha2x.State
	buf    []byte
	lo, hi int // buf[lo:hi] is read and not hashed yet
}

// pairs is a walk worker that reads and hashes two files at a time with
// sha2x (two SHA-256 streams interleaved on one core, nearly twice the
// bytes per second of one stream). Each file is opened and decided on
// exactly as by file (openFile); a file whose bytes are kept (KeepBytes,
// or a JSON file for the challenge-shape rule) is read by read instead.
// The same size rules apply: reading stops one byte past what fstat said,
// and a file that grew or shrank is refused (errChanged).
func (w *walker) pairs(buf []byte) {
	var lanes [2]lane
	for i := range lanes {
		lanes[i].buf = make([]byte, laneBytes)
	}
	open := true // w.jobs not yet closed
	for {
		for i := range lanes {
			for open && !lanes[i].active {
				// Wait for a file only when the other lane has none.
				j, ok, ready := w.nextJob(!lanes[1-i].active)
				if !ready {
					break
				}
				if !ok {
					open = false
					break
				}
				w.start(&lanes[i], j, buf)
			}
		}
		a, b := &lanes[0], &lanes[1]
		if !a.active && !b.active {
			if !open {
				return
			}
			continue
		}
		for _, l := range []*lane{a, b} {
			if l.active && l.hi-l.lo < sha2x.BlockSize && !l.eof {
				w.fill(l)
			}
		}
		na, nb := a.blocks(), b.blocks()
		switch {
		case na > 0 && nb > 0:
			n := min(na, nb) * sha2x.BlockSize
			sha2x.Blocks2(&a.st, &b.st, a.buf[a.lo:a.lo+n], b.buf[b.lo:b.lo+n])
			a.lo += n
			b.lo += n
		case na > 0:
			a.hashAlone()
		case nb > 0:
			b.hashAlone()
		}
		for _, l := range []*lane{a, b} {
			if l.active && l.eof && l.hi-l.lo < sha2x.BlockSize {
				w.finishLane(l)
			}
		}
	}
}

// nextJob takes the next file to read; without wait it returns ready false
// when none is queued yet.
func (w *walker) nextJob(wait bool) (j job, ok, ready bool) {
	if wait {
		j, ok = <-w.jobs
		return j, ok, true
	}
	select {
	case j, ok = <-w.jobs:
		return j, ok, true
	default:
		return job{}, false, false
	}
}

// start opens and checks the file of j; a regular file whose bytes need not
// be kept becomes l's, any other is read in full here (read) or refused.
func (w *walker) start(l *lane, j job, buf []byte) {
	if w.ctx.Err() != nil {
		j.dir.release()
		return // cancelled: the queued files are drained unopened
	}
	fd, st, ok := w.openFile(j.dir.fd, j.name, j.path)
	// The directory is needed only to open the entry beneath it.
	j.dir.release()
	if !ok {
		return
	}
	if testHook != nil {
		testHook("read " + j.path)
	}
	if w.keepsBytes(j.path) {
		w.read(fd, j.path, st.Size, buf)
		unix.Close(fd)
		return
	}
	*l = lane{active: true, path: j.path, fd: fd, size: st.Size, st: sha2x.New(), buf: l.buf}
}

// blocks returns the number of whole blocks l holds unhashed.
func (l *lane) blocks() int {
	if !l.active {
		return 0
	}
	return (l.hi - l.lo) / sha2x.BlockSize
}

// hashAlone hashes l's whole blocks as one stream (the other lane has
// nothing to pair with).
func (l *lane) hashAlone() {
	n := l.blocks() * sha2x.BlockSize
	sha2x.Blocks(&l.st, l.buf[l.lo:l.lo+n])
	l.lo += n
}

// fill moves l's unhashed tail (less than a block) to the front of its
// buffer and reads after it, never past one byte beyond the fstat size.
func (w *walker) fill(l *lane) {
	l.hi = copy(l.buf, l.buf[l.lo:l.hi])
	l.lo = 0
	want := min(int64(len(l.buf)-l.hi), l.size+1-l.read)
	if want <= 0 {
		l.eof = true // size+1 bytes read: it grew, refused in finishLane
		return
	}
	n, err := readFull(l.fd, l.buf[l.hi:l.hi+int(want)])
	if err != nil {
		w.problem(l.path, errUnreadable, err.Error())
		l.close()
		return
	}
	l.read += int64(n)
	l.hi += n
	if int64(n) < want {
		l.eof = true
	}
}

// finishLane ends l's file: refused when it did not have exactly the size
// fstat gave, otherwise its digest (the tail through crypto/sha256) is
// recorded with the content rules that apply to unkept files.
func (w *walker) finishLane(l *lane) {
	defer l.close()
	if l.read != l.size {
		w.problem(l.path, errChanged, fmt.Sprintf("fstat said %d bytes, read %d or more", l.size, l.read))
		return
	}
	sum := sha2x.Sum(&l.st, l.buf[l.lo:l.hi])
	w.record(l.path, hex.EncodeToString(sum[:]), l.size, nil)
}

func (l *lane) close() {
	unix.Close(l.fd)
	l.active = false
}
