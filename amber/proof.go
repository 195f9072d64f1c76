package amber

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

// ProofHeader opens every proof (c2sp.org/tlog-proof).
const ProofHeader = "c2sp.org/tlog-proof@v1"

const maxProofHashes = 64

// Proof is a C2SP tlog-proof for one entry: the entry's leaf bytes travel in
// the "extra" line, so the proof is self-contained and checks offline
// against the index key alone.
//
//	c2sp.org/tlog-proof@v1
//	extra <base64 of the entry's canonical JSON>
//	index <leaf index>
//	<base64 hash>            (the inclusion proof, one per line)
//
//	<the signed checkpoint>
type Proof struct {
	Entry      *Entry
	EntryBytes []byte
	Index      int64
	Hashes     tlog.RecordProof
	Checkpoint *Checkpoint
}

// Prove returns the tlog-proof of the latest entry of caseID against the
// index's current checkpoint.
func (ix *Index) Prove(caseID string) ([]byte, error) {
	_, i, ok := ix.Latest(caseID)
	if !ok {
		return nil, fmt.Errorf("%q: %w", caseID, errNotIndexed)
	}
	return ix.ProveIndex(i)
}

// ProveIndex returns the tlog-proof of leaf i.
func (ix *Index) ProveIndex(i int64) ([]byte, error) {
	p, err := tlog.ProveRecord(ix.Checkpoint.Size, i, ix)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(ProofHeader + "\n")
	fmt.Fprintf(&b, "extra %s\n", base64.StdEncoding.EncodeToString(ix.Lines[i]))
	fmt.Fprintf(&b, "index %d\n", i)
	for _, h := range p {
		b.WriteString(base64.StdEncoding.EncodeToString(h[:]) + "\n")
	}
	b.WriteString("\n")
	b.Write(ix.Checkpoint.Signed)
	return b.Bytes(), nil
}

// VerifyProof checks a tlog-proof offline: the checkpoint's signature with
// the index key vkey first, then the entry's form, then the inclusion of the
// entry's leaf hash under the signed root.
func VerifyProof(proof []byte, vkey string) (*Proof, error) {
	fail := func(err error) (*Proof, error) {
		return nil, &CheckError{Check: CheckInclusion, File: "tlog-proof", Err: err}
	}
	if len(proof) > maxCheckpoint+maxEntryLine*2+maxProofHashes*64 {
		return fail(fmt.Errorf("%w: too large", errProofForm))
	}
	head, signed, ok := bytes.Cut(proof, []byte("\n\n"))
	if !ok {
		return fail(fmt.Errorf("%w: no blank line before the checkpoint", errProofForm))
	}
	cp, err := OpenCheckpoint(signed, vkey)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(head), "\n")
	if len(lines) < 3 || lines[0] != ProofHeader {
		return fail(fmt.Errorf("%w: header", errProofForm))
	}
	extra, ok := strings.CutPrefix(lines[1], "extra ")
	if !ok {
		return fail(fmt.Errorf("%w: no extra line carrying the entry", errProofForm))
	}
	entryBytes, err := base64.StdEncoding.Strict().DecodeString(extra)
	if err != nil {
		return fail(fmt.Errorf("%w: extra: %w", errProofForm, err))
	}
	idxs, ok := strings.CutPrefix(lines[2], "index ")
	idx, err := strconv.ParseInt(idxs, 10, 64)
	if !ok || err != nil || idx < 0 || strconv.FormatInt(idx, 10) != idxs {
		return fail(fmt.Errorf("%w: index line %q", errProofForm, lines[2]))
	}
	if len(lines)-3 > maxProofHashes {
		return fail(fmt.Errorf("%w: more than %d hashes", errProofForm, maxProofHashes))
	}
	var hashes tlog.RecordProof
	for _, l := range lines[3:] {
		hb, err := base64.StdEncoding.Strict().DecodeString(l)
		if err != nil || len(hb) != tlog.HashSize {
			return fail(fmt.Errorf("%w: hash line %q", errProofForm, l))
		}
		var h tlog.Hash
		copy(h[:], hb)
		hashes = append(hashes, h)
	}
	if idx >= cp.Size {
		return fail(fmt.Errorf("%w: index %d beyond tree size %d", errProofForm, idx, cp.Size))
	}
	// The hash of the exact entry bytes, under the signed root.
	if err := tlog.CheckRecord(hashes, cp.Size, cp.Root, idx, tlog.RecordHash(entryBytes)); err != nil {
		return fail(fmt.Errorf("%w: %w", errMismatch, err))
	}
	e, err := ParseEntry(entryBytes)
	if err != nil {
		return fail(err)
	}
	return &Proof{Entry: e, EntryBytes: entryBytes, Index: idx, Hashes: hashes, Checkpoint: cp}, nil
}
