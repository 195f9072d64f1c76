package capbuf

import "bytes"

// Buffer keeps the first Max bytes written to it and discards the rest;
// Truncated says whether it discarded any. The zero Max keeps nothing. It
// is not safe for concurrent writers (give each stream its own Buffer).
type Buffer struct {
	Max       int
	buf       bytes.Buffer
	truncated bool
}

// Write keeps what fits under Max and reports all of p written.
func (b *Buffer) Write(p []byte) (int, error) {
	keep := p
	if room := max(b.Max-b.buf.Len(), 0); len(p) > room {
		// A writer producing more than the cap must not hold the memory.
		b.truncated = true
		keep = p[:room]
	}
	b.buf.Write(keep)
	return len(p), nil
}

// Bytes returns what was kept (aliasing the buffer).
func (b *Buffer) Bytes() []byte { return b.buf.Bytes() }

// String returns what was kept.
func (b *Buffer) String() string { return b.buf.String() }

// Truncated reports whether a write went over Max.
func (b *Buffer) Truncated() bool { return b.truncated }
