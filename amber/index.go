package amber

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
	"golang.org/x/sys/unix"
)

// The index is three plain files in one directory (AMBER-FORMATS "The
// public index"):
//
//	entries.jsonl  one entry per line, RFC 8785 canonical JSON, exactly the
//	               seven fields of Entry; the leaf data is the line without
//	               its newline
//	checkpoint     a C2SP tlog-checkpoint signed note: "<origin>\n<size>\n
//	               <base64 root>\n", a blank line, "— <origin> <sig>" lines
//	index.pub      the note verifier key "<origin>+<keyid>+<base64 key>"
//
// Leaves are hashed as RFC 6962 (golang.org/x/mod/sumdb/tlog). The private
// note key lives outside the index directory.
const (
	IndexEntriesFile    = "entries.jsonl"
	IndexCheckpointFile = "checkpoint"
	IndexPubFile        = "index.pub"
	maxIndexEntries     = 10_000_000
	maxCheckpoint       = 64 << 10
	maxIndexKey         = 4 << 10
	maxEntryLine        = 4 << 10
)

// Named checks of the index.
const (
	CheckCheckpointSignature = "checkpoint-signature"
	CheckCheckpointForm      = "checkpoint-form"
	CheckEntryForm           = "entry-form"
	CheckEntryCount          = "entry-count"
	CheckRootHash            = "root-hash"
	CheckHistoryRules        = "history-rules"
	CheckConsistency         = "consistency"
	CheckInclusion           = "inclusion"
	CheckIndexState          = "index-state"
)

// Rules of the index.
var (
	errIndexExists   = fault.New(fault.Unusable, "index directory is not empty")
	errEntryForm     = fault.New(fault.Refused, "index entry is not the canonical seven-field form")
	errHistory       = fault.New(fault.Refused, "index history breaks the append-only rules")
	errCheckpoint    = fault.New(fault.Refused, "malformed checkpoint")
	errNotIndexed    = fault.New(fault.Refused, "case is not in the index")
	errRetired       = fault.New(fault.Refused, "case is retired")
	errRewritten     = fault.New(fault.Refused, "index history was rewritten")
	errUncommitted   = errors.New("entries after the signed checkpoint")
	errProofForm     = fault.New(fault.Refused, "malformed tlog-proof")
	errIndexKey      = fault.New(fault.Refused, "index key does not match index.pub")
	errDuplicateCase = fault.New(fault.Refused, "case already in the index")
)

// Entry is one index entry. State is "active" or "retired:YYYY-MM-DD".
type Entry struct {
	CaseID           string `json:"case_id"`
	ManifestSHA256   string `json:"manifest_sha256"`
	BaseBundleSHA256 string `json:"base_bundle_sha256"`
	OraclePackSHA256 string `json:"oracle_pack_sha256"`
	SpecSHA256       string `json:"spec_sha256"`
	CutoffUTC        string `json:"cutoff_utc"`
	State            string `json:"state"`
}

var entryFields = []string{"case_id", "manifest_sha256", "base_bundle_sha256", "oracle_pack_sha256", "spec_sha256", "cutoff_utc", "state"}

var reState = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(active|retired:[0-9]{4}-[0-9]{2}-[0-9]{2})$`) })

// Retired reports whether the entry retires its case.
func (e *Entry) Retired() bool { return strings.HasPrefix(e.State, "retired:") }

// Canonical returns the entry's leaf bytes: RFC 8785 JSON, no newline.
func (e *Entry) Canonical() ([]byte, error) {
	o := evidence.NewObject()
	for _, kv := range [][2]string{
		{"case_id", e.CaseID}, {"manifest_sha256", e.ManifestSHA256}, {"base_bundle_sha256", e.BaseBundleSHA256},
		{"oracle_pack_sha256", e.OraclePackSHA256}, {"spec_sha256", e.SpecSHA256}, {"cutoff_utc", e.CutoffUTC}, {"state", e.State},
	} {
		o.Set(kv[0], kv[1])
	}
	if err := checkEntry(o); err != nil {
		return nil, err
	}
	return evidence.Canonical(o)
}

func checkEntry(o *evidence.Object) error {
	c := &checker{file: IndexEntriesFile}
	c.object("", o, entryFields, nil)
	c.str(o, "", "case_id", reCaseID())
	for _, f := range []string{"manifest_sha256", "base_bundle_sha256", "oracle_pack_sha256", "spec_sha256"} {
		c.str(o, "", f, reSHA256())
	}
	c.str(o, "", "cutoff_utc", reUTC())
	c.str(o, "", "state", reState())
	if len(c.errs) > 0 {
		return fmt.Errorf("%w: %v", errEntryForm, c.errs)
	}
	return nil
}

// ParseEntry reads one leaf: strict JSON, exactly the seven fields, and the
// bytes must be the canonical encoding (one entry, one byte string: two
// spellings of the same entry would be two different leaves).
func ParseEntry(line []byte) (*Entry, error) {
	if len(line) > maxEntryLine {
		return nil, fmt.Errorf("%w: over %d bytes", errEntryForm, maxEntryLine)
	}
	o, err := evidence.ReadObject(line)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errEntryForm, err)
	}
	if err := checkEntry(o); err != nil {
		return nil, err
	}
	canon, err := evidence.Canonical(o)
	if err != nil || !bytes.Equal(canon, line) {
		return nil, fmt.Errorf("%w: not RFC 8785 canonical", errEntryForm)
	}
	get := func(n string) string { v, _ := o.Get(n); return v.(string) }
	return &Entry{CaseID: get("case_id"), ManifestSHA256: get("manifest_sha256"), BaseBundleSHA256: get("base_bundle_sha256"),
		OraclePackSHA256: get("oracle_pack_sha256"), SpecSHA256: get("spec_sha256"), CutoffUTC: get("cutoff_utc"), State: get("state")}, nil
}

// Checkpoint is a parsed C2SP checkpoint body.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
	Signed []byte // the signed note bytes
}

// FormatCheckpoint returns the checkpoint body "<origin>\n<size>\n<b64>\n".
func FormatCheckpoint(origin string, size int64, root tlog.Hash) string {
	return fmt.Sprintf("%s\n%d\n%s\n", origin, size, base64.StdEncoding.EncodeToString(root[:]))
}

// OpenCheckpoint verifies a signed checkpoint with the index key (vkey) and
// then parses its body: exactly three lines, the origin equal to the key
// name, a canonical decimal size, a 32-byte root. Verify, then parse.
// Signature lines of other keys (witness cosignatures) are ignored, as C2SP
// signed-note requires; every line must still be well formed, and exactly
// one, valid, by the index key.
func OpenCheckpoint(signed []byte, vkey string) (*Checkpoint, error) {
	if len(signed) > maxCheckpoint {
		return nil, &CheckError{Check: CheckCheckpointForm, File: IndexCheckpointFile, Err: fmt.Errorf("%w: over %d bytes", errCheckpoint, maxCheckpoint)}
	}
	v, err := note.NewVerifier(strings.TrimSpace(vkey))
	if err != nil {
		return nil, &CheckError{Check: CheckCheckpointSignature, File: IndexPubFile, Err: err}
	}
	// The signature lines first, by the grammar (a malformed line is a
	// form error, not an unverified note).
	if err := checkSignatureLines(signed, v); err != nil {
		return nil, &CheckError{Check: CheckCheckpointForm, File: IndexCheckpointFile, Err: fmt.Errorf("%w: %w", errCheckpoint, err)}
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		// An UnverifiedNoteError: no signature by the index key (a
		// checkpoint signed by another key, or a tampered body).
		return nil, &CheckError{Check: CheckCheckpointSignature, File: IndexCheckpointFile, Err: fmt.Errorf("checkpoint not signed by %s: %w", v.Name(), err)}
	}
	lines := strings.Split(n.Text, "\n")
	fail := func(f string, a ...any) (*Checkpoint, error) {
		return nil, &CheckError{Check: CheckCheckpointForm, File: IndexCheckpointFile, Err: fmt.Errorf("%w: "+f, append([]any{errCheckpoint}, a...)...)}
	}
	if len(n.Sigs) != 1 {
		// checkSignatureLines allows one line by the index key; note.Open
		// verified it. Anything else is a bug, refused all the same.
		return fail("want exactly one signature by the index key; found %d", len(n.Sigs))
	}
	// Three lines and the final newline; extension lines are not written
	// by cleanroom and so are refused.
	if len(lines) != 4 || lines[3] != "" {
		return fail("want exactly origin, size and root lines")
	}
	if lines[0] != v.Name() {
		return fail("origin %q is not the key name %q", lines[0], v.Name())
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return fail("size %q is not a canonical decimal", lines[1])
	}
	rb, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(rb) != tlog.HashSize {
		return fail("root %q is not base64 of 32 bytes", lines[2])
	}
	cp := &Checkpoint{Origin: lines[0], Size: size, Signed: signed}
	copy(cp.Root[:], rb)
	return cp, nil
}

// maxSignatureLines bounds the signature lines of a checkpoint (C2SP
// signed-note: verifiers MUST accept at least 16; x/mod/sumdb/note stops at
// 100).
const maxSignatureLines = 100

// checkSignatureLines checks the signature block of a signed checkpoint
// against C2SP signed-note, strictly, and that exactly one line claims the
// index key v (its name and key ID). Lines of other keys (witness
// cosignatures, c2sp.org/tlog-cosignature) are left alone: the spec says a
// verifier MUST ignore signatures from unknown keys, even ones sharing the
// name or the ID (not both) of a known key. The index key's own line is
// verified by note.Open afterwards.
func checkSignatureLines(signed []byte, v note.Verifier) error {
	split := bytes.LastIndex(signed, []byte("\n\n"))
	if split < 0 {
		return errors.New("no blank line between the text and the signatures")
	}
	block := signed[split+2:]
	if len(block) == 0 {
		return errors.New("no signature lines after the last blank line")
	}
	if block[len(block)-1] != '\n' {
		return errors.New("the signature lines do not end in a newline")
	}
	lines := strings.Split(string(block[:len(block)-1]), "\n")
	if len(lines) > maxSignatureLines {
		return fmt.Errorf("%d signature lines, over %d", len(lines), maxSignatureLines)
	}
	claims := 0
	for i, line := range lines {
		rest, ok := strings.CutPrefix(line, "— ")
		if !ok {
			return fmt.Errorf("signature line %d does not start with an em dash and a space", i+1)
		}
		name, b64, ok := strings.Cut(rest, " ")
		if !ok || name == "" || !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsSpace) >= 0 || strings.Contains(name, "+") {
			return fmt.Errorf("signature line %d: key name %q is empty or holds a space or '+'", i+1, name)
		}
		// Strict base64 (zero padding bits, no spaces): one key's
		// signature has one spelling, so the same checkpoint is not
		// several byte strings. A key ID and at least one signature byte.
		sig, err := base64.StdEncoding.Strict().DecodeString(b64)
		if err != nil || len(sig) < 5 {
			return fmt.Errorf("signature line %d (%s): not strict base64 of a key ID and a signature", i+1, name)
		}
		if name == v.Name() && binary.BigEndian.Uint32(sig) == v.KeyHash() {
			claims++
		}
	}
	// note.Open keeps the first of several lines by one key and skips the
	// rest; two lines claiming the index key would be two spellings of the
	// checkpoint (or a forged line riding along a real one): refused.
	if claims > 1 {
		return fmt.Errorf("%d signature lines claim the index key %s; want one", claims, v.Name())
	}
	return nil
}

// Index is a loaded and verified index.
type Index struct {
	Dir        string
	VKey       string
	Checkpoint *Checkpoint
	Entries    []*Entry
	Lines      [][]byte
	hashes     []tlog.Hash // stored hashes (tlog layout)
	latest     map[string]int64
}

// ReadHashes implements tlog.HashReader over the in-memory stored hashes.
func (ix *Index) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(ix.hashes)) {
			return nil, fmt.Errorf("stored hash %d out of range", x)
		}
		out[i] = ix.hashes[x]
	}
	return out, nil
}

// addLeaf appends one entry and its stored hashes.
func (ix *Index) addLeaf(line []byte, e *Entry) error {
	hs, err := tlog.StoredHashes(int64(len(ix.Lines)), line, ix)
	if err != nil {
		return err
	}
	ix.hashes = append(ix.hashes, hs...)
	if ix.latest == nil {
		ix.latest = map[string]int64{}
	}
	ix.latest[e.CaseID] = int64(len(ix.Lines))
	ix.Lines = append(ix.Lines, line)
	ix.Entries = append(ix.Entries, e)
	return nil
}

// Root returns the Merkle root over the current entries.
func (ix *Index) Root() (tlog.Hash, error) { return tlog.TreeHash(int64(len(ix.Lines)), ix) }

// Latest returns the latest entry for caseID and its leaf index.
func (ix *Index) Latest(caseID string) (*Entry, int64, bool) {
	i, ok := ix.latest[caseID]
	if !ok {
		return nil, -1, false
	}
	return ix.Entries[i], i, true
}

// InitIndex creates an index in dir (absent or empty) with a new note key
// named origin, written to keyOut (mode 0600, never overwritten). The index
// starts with a signed checkpoint of size 0. An absent dir is written whole
// beside it and published with one rename; an existing empty dir is filled
// in place. Either way a failure leaves neither a part of an index nor the
// new key behind, so the same command can simply be run again.
func InitIndex(dir, origin, keyOut string) (ix *Index, err error) {
	if origin == "" || strings.ContainsAny(origin, "\n+ ") {
		return nil, fmt.Errorf("%w: origin %q must be non-empty, without spaces, '+' or newlines", errBuildArgument, origin)
	}
	dir = filepath.Clean(dir)
	ents, err := os.ReadDir(dir)
	switch {
	case err == nil && len(ents) > 0:
		return nil, fmt.Errorf("%s: %w", dir, errIndexExists)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	existed := err == nil
	if err := durable.MkdirAll(filepath.Dir(dir)); err != nil {
		return nil, err
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		return nil, err
	}
	if err := durable.CreateFile(keyOut, []byte(skey+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("index key: %w", err)
	}
	published := false
	defer func() {
		if !published {
			// This call created the key exclusively and nothing has used
			// it: without it a retry would be refused for an existing key.
			os.Remove(keyOut)
		}
	}()
	// An existing empty directory is the caller's (".", a symbolic link
	// to a directory, a mount point): it is filled in place, never removed
	// to make way for a staged one, which would refuse "." and replace a
	// link with a directory. What this call created in it goes on failure.
	target := dir
	var created []string
	if existed {
		defer func() {
			if !published {
				for _, p := range created {
					os.Remove(p)
				}
			}
		}()
	} else {
		stage, err := durable.StageDir(dir)
		if err != nil {
			return nil, err
		}
		defer func() {
			if !published {
				os.RemoveAll(stage)
			}
		}()
		target = stage
	}
	ix = &Index{Dir: target, VKey: vkey}
	for _, f := range []struct {
		name string
		data []byte
	}{{IndexPubFile, []byte(vkey + "\n")}, {IndexEntriesFile, nil}} {
		p := filepath.Join(target, f.name)
		if err := durable.CreateFile(p, f.data, 0o644); err != nil {
			return nil, err
		}
		created = append(created, p)
	}
	s, err := ix.signer(skey)
	if err != nil {
		return nil, err
	}
	if err := ix.sign(s); err != nil {
		return nil, err
	}
	if !existed {
		if err := durable.CreateDir(target, dir, 0o755); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("%s: %w", dir, errIndexExists)
			}
			if _, serr := os.Lstat(target); errors.Is(serr, fs.ErrNotExist) {
				// Renamed into place, then the parent's fsync failed: the
				// index is published, so its key must stay with it.
				published = true
				return nil, fmt.Errorf("%s: the index is in place but its directory could not be synced (its key is %s): %w", dir, keyOut, err)
			}
			return nil, err
		}
	}
	published = true
	ix.Dir = dir
	return ix, nil
}

// sign signs a checkpoint over the current entries with s (from ix.signer,
// so the key index.pub names) and writes it.
func (ix *Index) sign(s note.Signer) error {
	root, err := ix.Root()
	if err != nil {
		return err
	}
	signed, err := note.Sign(&note.Note{Text: FormatCheckpoint(s.Name(), int64(len(ix.Lines)), root)}, s)
	if err != nil {
		return err
	}
	cp, err := OpenCheckpoint(signed, ix.VKey)
	if err != nil {
		return err
	}
	if err := durable.ReplaceFile(filepath.Join(ix.Dir, IndexCheckpointFile), signed, 0o644); err != nil {
		return err
	}
	ix.Checkpoint = cp
	return nil
}

// LoadIndex reads and fully verifies the index in dir. vkey is the trusted
// index key; empty means the index's own index.pub (trust on first use: a
// consumer should pin the key it was given out of band).
func LoadIndex(dir, vkey string) (*Index, error) {
	ix, _, _, err := loadIndex(dir, vkey, false)
	return ix, err
}

// loadIndex is LoadIndex; with allowTail it also returns the length of the
// committed entries and the entries file it read them from (see
// readEntriesTail).
func loadIndex(dir, vkey string, allowTail bool) (*Index, int64, os.FileInfo, error) {
	pub, err := readCapped(filepath.Join(dir, IndexPubFile), maxIndexKey)
	if err != nil {
		return nil, 0, nil, err
	}
	if vkey == "" {
		vkey = string(pub)
	} else if strings.TrimSpace(vkey) != strings.TrimSpace(string(pub)) {
		return nil, 0, nil, &CheckError{Check: CheckCheckpointSignature, File: IndexPubFile, Err: fmt.Errorf("%w: index.pub is not the trusted key", errIndexKey)}
	}
	ix := &Index{Dir: dir, VKey: strings.TrimSpace(vkey)}
	signed, err := readCapped(filepath.Join(dir, IndexCheckpointFile), maxCheckpoint)
	if err != nil {
		return nil, 0, nil, err
	}
	cp, err := OpenCheckpoint(signed, ix.VKey)
	if err != nil {
		return nil, 0, nil, err
	}
	ix.Checkpoint = cp
	committed, read, err := ix.readEntriesTail(allowTail)
	if err != nil {
		return nil, 0, nil, err
	}
	return ix, committed, read, nil
}

// readEntriesTail reads the entries the checkpoint covers and verifies them.
// Bytes after them are an uncommitted tail: entries appended but never
// signed (an append interrupted between its write and its checkpoint, or
// lines added without the key). They are not part of the log. A reader
// refuses them (errUncommitted: it cannot tell a crash from tampering);
// with allowTail the tail is tolerated and its offset returned, so that the
// key holder's next write can discard it before appending.
func (ix *Index) readEntriesTail(allowTail bool) (committed int64, read os.FileInfo, err error) {
	path := filepath.Join(ix.Dir, IndexEntriesFile)
	f, read, err := openRegular(path)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	fail := func(check string, line int, err error) error {
		return &CheckError{Check: check, File: fmt.Sprintf("%s:%d", path, line), Err: err}
	}
	// The signed size is the signer's claim, not the file's: preallocating
	// for it let a checkpoint claiming 2^62 entries panic the reader (or
	// claim 10^7 over an empty file and cost a gigabyte). Capacity follows
	// what the file can hold (four hex hashes make a line over 256 bytes).
	if ix.Checkpoint.Size > maxIndexEntries {
		return 0, nil, fail(CheckEntryCount, 0, fmt.Errorf("checkpoint size %d over %d entries", ix.Checkpoint.Size, maxIndexEntries))
	}
	capacity := min(ix.Checkpoint.Size, read.Size()/256)
	ix.hashes = make([]tlog.Hash, 0, 2*capacity+1)
	ix.Lines = make([][]byte, 0, capacity)
	ix.Entries = make([]*Entry, 0, capacity)
	for int64(len(ix.Lines)) < ix.Checkpoint.Size {
		n := len(ix.Lines) + 1
		if n > maxIndexEntries {
			return 0, nil, fail(CheckEntryCount, n, fmt.Errorf("over %d entries", maxIndexEntries))
		}
		line, err := readEntryLine(r)
		if err == io.EOF {
			// Fewer entries than the checkpoint signs: history was cut.
			return 0, nil, fail(CheckEntryCount, n-1, fmt.Errorf("%w: %d entries, checkpoint size %d", errRewritten, n-1, ix.Checkpoint.Size))
		}
		if err != nil {
			return 0, nil, fail(CheckEntryForm, n, err)
		}
		e, err := ParseEntry(line)
		if err != nil {
			return 0, nil, fail(CheckEntryForm, n, err)
		}
		if err := ix.addLeaf(line, e); err != nil {
			return 0, nil, err
		}
		committed += int64(len(line)) + 1
	}
	// One byte past the committed entries says whether there is a tail; its
	// length comes from fstat, not from reading what may be gigabytes.
	if _, err := r.ReadByte(); err == nil && !allowTail {
		tail := "some bytes"
		if fi, err := f.Stat(); err == nil && fi.Size() > committed {
			tail = fmt.Sprintf("%d bytes", fi.Size()-committed)
		}
		return 0, nil, fail(CheckEntryCount, len(ix.Lines)+1, fmt.Errorf("%w: %s after the %d entries the checkpoint signs (an interrupted append, or lines added without the key; the key holder's next append or retirement discards them)", errUncommitted, tail, ix.Checkpoint.Size))
	} else if err != nil && err != io.EOF {
		return 0, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	root, err := ix.Root()
	if err != nil {
		return 0, nil, err
	}
	// Every leaf is covered by the signed root: an entry edited in place,
	// inserted, removed or reordered changes the root.
	if root != ix.Checkpoint.Root {
		return 0, nil, &CheckError{Check: CheckRootHash, File: path, Err: fmt.Errorf("%w: entries hash to %s, checkpoint signs %s", errRewritten, root, ix.Checkpoint.Root)}
	}
	return committed, read, ix.checkHistory()
}

// readEntryLine returns one newline-terminated entry line without its
// newline. A line over maxEntryLine, or a last line without its newline
// (a torn write), is errEntryForm.
func readEntryLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxEntryLine+1 {
			return nil, fmt.Errorf("%w: over %d bytes", errEntryForm, maxEntryLine)
		}
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && len(line) == 0:
			return nil, io.EOF
		case err == io.EOF:
			return nil, fmt.Errorf("%w: last line has no newline (a torn write)", errEntryForm)
		default:
			return nil, err
		}
	}
}

// checkHistory applies the append-only rules per case: the first entry is
// active, a later entry can only retire it (same hashes and cutoff), and
// nothing follows a retirement.
func (ix *Index) checkHistory() error {
	latest := map[string]*Entry{}
	for i, e := range ix.Entries {
		prev, seen := latest[e.CaseID]
		var err error
		switch {
		case !seen && e.Retired():
			err = fmt.Errorf("first entry of case %q is already retired", e.CaseID)
		case seen && !e.Retired():
			err = fmt.Errorf("case %q appended twice as active", e.CaseID)
		case seen && prev.Retired():
			err = fmt.Errorf("case %q has an entry after its retirement", e.CaseID)
		case seen && (prev.ManifestSHA256 != e.ManifestSHA256 || prev.BaseBundleSHA256 != e.BaseBundleSHA256 ||
			prev.OraclePackSHA256 != e.OraclePackSHA256 || prev.SpecSHA256 != e.SpecSHA256 || prev.CutoffUTC != e.CutoffUTC):
			err = fmt.Errorf("retirement of case %q changes its hashes", e.CaseID)
		}
		if err != nil {
			return &CheckError{Check: CheckHistoryRules, File: fmt.Sprintf("%s:%d", filepath.Join(ix.Dir, IndexEntriesFile), i+1), Err: fmt.Errorf("%w: %w", errHistory, err)}
		}
		latest[e.CaseID] = e
	}
	return nil
}

// VerifySince proves that the index's checkpoint extends a previously
// trusted one (signed by the same key): a consistency proof from the old
// size to the new, checked against both signed roots.
func (ix *Index) VerifySince(oldSigned []byte) (*Checkpoint, error) {
	old, err := OpenCheckpoint(oldSigned, ix.VKey)
	if err != nil {
		return nil, err
	}
	fail := func(err error) error {
		return &CheckError{Check: CheckConsistency, File: IndexCheckpointFile, Err: err}
	}
	if old.Size > ix.Checkpoint.Size {
		return old, fail(fmt.Errorf("%w: trusted checkpoint has %d entries, current %d", errRewritten, old.Size, ix.Checkpoint.Size))
	}
	if old.Size == 0 {
		// Every log extends the empty one, whose root is SHA-256("").
		if old.Root != tlog.Hash(sha256.Sum256(nil)) {
			return old, fail(fmt.Errorf("%w: empty checkpoint with a non-empty root", errRewritten))
		}
		return old, nil
	}
	proof, err := tlog.ProveTree(ix.Checkpoint.Size, old.Size, ix)
	if err != nil {
		return old, fail(err)
	}
	if err := tlog.CheckTree(proof, ix.Checkpoint.Size, ix.Checkpoint.Root, old.Size, old.Root); err != nil {
		return old, fail(fmt.Errorf("%w: %w", errRewritten, err))
	}
	return old, nil
}

// loadForWrite loads the index and checks the signing key before any change.
func loadForWrite(dir, skeyPath string) (*Index, string, error) {
	skey, err := readCapped(skeyPath, maxIndexKey)
	if err != nil {
		return nil, "", err
	}
	ix, committed, read, err := loadIndex(dir, "", true)
	if err != nil {
		return nil, "", err
	}
	// Only the key holder may discard the tail: a write with another key
	// is refused here, before the truncation changes the entries file.
	if _, err := ix.signer(string(skey)); err != nil {
		return nil, "", err
	}
	// The caller holds the index lock, the committed entries verified
	// against the signed checkpoint, and the key is about to sign the next
	// one: an uncommitted tail (never signed, so never part of the log) is
	// cut off here, so that an interrupted append does not wedge the index
	// and no unsigned line ever gets signed by being appended after.
	if err := truncateEntries(filepath.Join(dir, IndexEntriesFile), committed, read); err != nil {
		return nil, "", err
	}
	// A write killed between its temporary checkpoint and the rename left
	// that file in the published index; only a writer (holding the lock
	// this caller holds) writes one, so any there now is such a leftover.
	if _, err := durable.RemoveTemps(dir); err != nil {
		return nil, "", fmt.Errorf("removing what an interrupted write left in the index: %w", err)
	}
	return ix, string(skey), nil
}

// truncateEntries cuts the entries file to size bytes (if it is longer) and
// syncs it, only while path is still the file read is (the one whose
// first size bytes were verified).
func truncateEntries(path string, size int64, read os.FileInfo) error {
	// O_NOFOLLOW: a symlink planted as the entries file would truncate its
	// target. O_NONBLOCK: a FIFO swapped in cannot hang the open.
	f, err := os.OpenFile(path, os.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %w", path, errNotRegular)
	}
	// A file swapped in after the verification is not the log that was
	// verified: cutting it at the verified length would be a guess.
	if !os.SameFile(fi, read) {
		return &CheckError{Check: CheckEntryCount, File: path, Err: fmt.Errorf("%w: the entries file was replaced while it was verified", errRewritten)}
	}
	if fi.Size() <= size {
		return nil
	}
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("discarding the uncommitted tail of %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	return f.Close()
}

// signer returns the note signer of skey, refused (errIndexKey) unless it
// is the key index.pub names: a checkpoint signed with another key would
// verify for no one, and a write with it must change nothing.
func (ix *Index) signer(skey string) (note.Signer, error) {
	s, err := note.NewSigner(strings.TrimSpace(skey))
	if err != nil {
		return nil, fmt.Errorf("index key: %w", err)
	}
	v, err := note.NewVerifier(strings.TrimSpace(ix.VKey))
	if err != nil {
		return nil, err
	}
	if s.Name() != v.Name() || s.KeyHash() != v.KeyHash() {
		return nil, fmt.Errorf("%w: key %s+%08x, index.pub %s+%08x", errIndexKey, s.Name(), s.KeyHash(), v.Name(), v.KeyHash())
	}
	return s, nil
}

// commit appends the entries to entries.jsonl (O_APPEND, synced), then
// writes the new signed checkpoint atomically. A crash between the two (or
// during the append) leaves an uncommitted tail the checkpoint does not
// cover: LoadIndex refuses it (errUncommitted) rather than trusts it, and
// the key holder's next write discards it (loadForWrite).
func (ix *Index) commit(skey string, es ...*Entry) error {
	// Checked before the append: entries no checkpoint will sign are
	// never written.
	s, err := ix.signer(skey)
	if err != nil {
		return err
	}
	lines := make([][]byte, len(es))
	for i, e := range es {
		if lines[i], err = e.Canonical(); err != nil {
			return err
		}
	}
	var buf bytes.Buffer
	for i, e := range es {
		if err := ix.addLeaf(lines[i], e); err != nil {
			return err
		}
		buf.Write(lines[i])
		buf.WriteByte('\n')
	}
	path := filepath.Join(ix.Dir, IndexEntriesFile)
	// O_NOFOLLOW: a symlink planted as the entries file would send the
	// append (and the log's history) somewhere else.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("appending to %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return ix.sign(s)
}

// AppendBatch appends several new active entries under one checkpoint.
func (ix *Index) AppendBatch(skey string, es []*Entry) error {
	seen := map[string]bool{}
	for _, e := range es {
		if e.State != "active" {
			return fmt.Errorf("%w: a new entry must be active", errHistory)
		}
		if _, _, ok := ix.Latest(e.CaseID); ok || seen[e.CaseID] {
			return fmt.Errorf("%q: %w", e.CaseID, errDuplicateCase)
		}
		seen[e.CaseID] = true
	}
	return ix.commit(skey, es...)
}

// Append adds an active entry for a case not yet in the index.
func (ix *Index) Append(skey string, e *Entry) error {
	if e.State != "active" {
		return fmt.Errorf("%w: a new entry must be active", errHistory)
	}
	if _, _, ok := ix.Latest(e.CaseID); ok {
		return fmt.Errorf("%q: %w", e.CaseID, errDuplicateCase)
	}
	return ix.commit(skey, e)
}

// Retire appends the retirement of an active case; nothing is edited.
func (ix *Index) Retire(skey, caseID, date string) error {
	if !regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`).MatchString(date) {
		return fmt.Errorf("%w: retirement date %q must be YYYY-MM-DD", errBuildArgument, date)
	}
	prev, _, ok := ix.Latest(caseID)
	if !ok {
		return fmt.Errorf("%q: %w", caseID, errNotIndexed)
	}
	if prev.Retired() {
		return fmt.Errorf("%q: %w (%s)", caseID, errRetired, prev.State)
	}
	e := *prev
	e.State = "retired:" + date
	return ix.commit(skey, &e)
}

// EntryFromManifest is the index entry of a verified manifest.
func EntryFromManifest(m *Manifest, manifestSHA256 string) *Entry {
	return &Entry{
		CaseID: m.CaseID, ManifestSHA256: manifestSHA256,
		BaseBundleSHA256: m.Artifacts.BaseBundleSHA256, OraclePackSHA256: m.Artifacts.OraclePackSHA256,
		SpecSHA256: m.SpecSHA256, CutoffUTC: m.CutoffUTC, State: "active",
	}
}

// errIndexBusy: another writer holds the index.
var errIndexBusy = fault.New(fault.Refused, "index is being written by another process")

// lockIndex holds the index directory (durable.HoldDir) for one
// load-append-sign cycle: two writers appending at once would both extend
// the same tree and one checkpoint would not cover the other's leaf.
func lockIndex(dir string) (func(), error) {
	unlock, err := durable.HoldDir(dir)
	if errors.Is(err, durable.ErrHeld) {
		return nil, fmt.Errorf("%s: %w", dir, errIndexBusy)
	}
	return unlock, err
}

// AppendCaseFile appends an active entry to the index at dir, signing the
// new checkpoint with the note key in skeyPath.
func AppendCaseFile(dir, skeyPath string, e *Entry) (*Index, error) {
	return writeIndex(dir, skeyPath, func(ix *Index, skey string) error { return ix.Append(skey, e) })
}

// RetireCaseFile retires caseID in the index at dir.
func RetireCaseFile(dir, skeyPath, caseID, date string) (*Index, error) {
	return writeIndex(dir, skeyPath, func(ix *Index, skey string) error { return ix.Retire(skey, caseID, date) })
}

// writeIndex is one load-change-sign cycle of the index at dir, under its
// lock (lockIndex).
func writeIndex(dir, skeyPath string, change func(ix *Index, skey string) error) (*Index, error) {
	unlock, err := lockIndex(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	ix, skey, err := loadForWrite(dir, skeyPath)
	if err != nil {
		return nil, err
	}
	return ix, change(ix, skey)
}

// LoadIndexUnchecked reads index.pub and entries.jsonl without checking
// them against the checkpoint. Only for rebuilding an index from its
// entries (tests, recovery); never for reading one.
func LoadIndexUnchecked(dir string) (*Index, error) {
	pub, err := readCapped(filepath.Join(dir, IndexPubFile), maxIndexKey)
	if err != nil {
		return nil, err
	}
	ix := &Index{Dir: dir, VKey: strings.TrimSpace(string(pub))}
	b, err := readCapped(filepath.Join(dir, IndexEntriesFile), maxIndexEntries*maxEntryLine)
	if err != nil {
		return nil, err
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		e, err := ParseEntry(l)
		if err != nil {
			return nil, err
		}
		if err := ix.addLeaf(l, e); err != nil {
			return nil, err
		}
	}
	return ix, nil
}
