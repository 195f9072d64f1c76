package harness

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"syscall"

	"github.com/cleanroom-dev/cleanroom/internal/deathsig"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/cleanroom-dev/cleanroom/sandbox/seal"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// DefaultViewBytes is the size limit of the view's tmpfs.
const DefaultViewBytes = 64 << 20

// ServeOptions configure one sealed session.
type ServeOptions struct {
	PackageDir string // the package to emit (absolute)
	Expect     string // the pinned bpkg; emission is refused for any other
	RootLabel  string // manifest root label; "" = pkgwalk.DefaultRootLabel
	Workspace  string // absolute; must not exist
	Transcript string // absolute or ""; must not exist
	ViewBytes  int64  // tmpfs size limit; 0 = DefaultViewBytes
	Limits     Limits // zero = DefaultLimits
	// Stage is the open room binary (OpenStage) that runs the stages, or
	// nil for this program's own binary (/proc/self/exe).
	Stage *os.File
	// StageArgs is the argument prefix that makes the stage binary call
	// RunStage with the arguments that follow (the command line's hidden
	// "room sealed-stage"; a test binary's own marker; none for the room
	// binary).
	StageArgs []string
	// Resume continues an interrupted session (room drive --resume): the
	// workspace and the transcript must exist; the workspace is reopened
	// (ReopenWorkspace) and the transcript appended to (ResumeTranscript).
	Resume bool
	// Stop, if set, ends the session when it is closed: the room is sent
	// SIGTERM and ends as on a signal (its end line written). Room agent's
	// bound on a room whose stdin the agent keeps open past its sandbox.
	Stop <-chan struct{}
}

// stageEnv is the whole environment of the sealed stages: nothing of the
// caller's (an API key in the relay's environment must not reach the room).
// updatemaxprocs=0,containermaxprocs=0 stop the Go runtime from holding the
// host's cgroup CPU files open for the life of the server.
//
// GOGC=off: the stages' heaps are budgeted by a soft memory limit instead of
// the collector's default pacing (a collection each time the heap doubles).
// Start-up (delivery, then measurement) allocates about the package and
// keeps most of it, so collections then free little and cost milliseconds
// of readiness; while serving, the heap grows by the garbage of the calls
// (about 15 KB per small message with the vendored SDK) until the limit
// starts a collection. The budget is startupMemoryLimit from each stage's
// first act, then, once the view is verified, serveMemoryLimit.
var stageEnv = []string{"GODEBUG=updatemaxprocs=0,containermaxprocs=0", "GOGC=off"}

// startupMemoryLimit bounds a stage's heap before the package's size is
// known: its bytes (at most the view's size) held once, a second package's
// worth of verification buffers, and the runtime's own.
func startupMemoryLimit(viewBytes int64) int64 { return 2*viewBytes + 32<<20 }

// serveMemoryLimit is the serve process's memory budget (the Go runtime's
// whole, not only its heap): the verified bytes it holds; 8 MiB for the
// runtime's own (about 4 MiB of metadata, stacks and buffers), the MCP
// server and the garbage of a few hundred small calls between collections;
// and one answer's transient copies of the largest file (the SDK holds its
// encoded text and the framed response at once: twice the file). Issue 5
// caps the serving process's peak RSS at package bytes + 20 MiB, and about
// 7.5 MiB of that is the room binary's own pages. A larger answer (a big
// write_source) only makes the runtime collect more often while it lasts:
// the limit is soft.
//
// Nor is it ever less than inUse (all the runtime holds once the view is
// open, its start-up garbage included) + 2 MiB + twice the largest file:
// the view costs more than its bytes (each file's allocation rounded up to
// a size class, its path, digest and index entry: 10,000 files of 4 KiB
// take about 49 MiB for 39), and with GOGC=off a limit below the live heap
// makes the collector run every few allocations for the whole session.
func serveMemoryLimit(v *pkgwalk.View, inUse int64) int64 {
	var total int64
	largest := 0
	for _, f := range v.Files {
		total += int64(len(f.Data))
		largest = max(largest, len(f.Data))
	}
	return max(total+8<<20, inUse+2<<20) + 2*int64(largest)
}

// runtimeInUse is the memory the Go runtime holds now, counted as its
// memory limit counts it: all it has mapped, less what it has returned.
func runtimeInUse() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}

// errTranscriptExists: an existing transcript path is never appended to
// nor written through (a planted symlink): one transcript is one session.
const errTranscriptExists pkgwalk.Rule = "transcript already exists"

// errTranscriptInWorkspace: write_source could replace a transcript
// inside the workspace, and the implementer would write the record of its
// own session.
const errTranscriptInWorkspace pkgwalk.Rule = "transcript inside the workspace"

// ExitError carries the sealed server's exit status.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("sealed server exited with status %d", e.Code) }

// Serve runs one sealed session: it creates an empty mount point, starts
// the stage binary (o.Stage, or else this binary again with o.StageArgs)
// in fresh mount and network namespaces (the seal stage), hands it stdin
// and stdout for MCP, waits for it, and removes the mount point (the host
// only ever sees an empty directory). The seal stage mounts, delivers,
// seals and asserts, then execs the serve stage with no privileges, which
// measures the view against the pin and serves it.
func Serve(ctx context.Context, o ServeOptions, stdin io.Reader, stdout, stderr io.Writer) error {
	if err := o.check(); err != nil {
		return err
	}
	if err := o.checkOutside(); err != nil {
		return err
	}
	mount, err := os.MkdirTemp("", "cleanroom-view-")
	if err != nil {
		return fmt.Errorf("creating the view's mount point: %w", err)
	}
	defer os.Remove(mount)
	// The seal is asserted by the mount point's name in mountinfo, which
	// names the directory mount(2) resolved: a $TMPDIR through a symbolic
	// link would leave the view at a name no entry has.
	if mount, err = filepath.EvalSymlinks(mount); err != nil {
		return fmt.Errorf("resolving the view's mount point: %w", err)
	}
	args := append(append([]string{}, o.StageArgs...), "seal")
	args = append(args, o.flags(mount)...)
	// A signal to this process is passed on to the room, which ends its
	// session cleanly (transcript end line), so that this process lives to
	// remove the mount point.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	exe, what := "/proc/self/exe", "the sealed server"
	if o.Stage != nil {
		exe, what = StageExe(o.Stage), "the sealed server (room binary "+o.Stage.Name()+")"
	}
	cmd := seal.SealedCommand(exe, args, stageEnv)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	waited, err := deathsig.Start(cmd)
	runtime.KeepAlive(o.Stage) // its descriptor is the executable's name until the exec
	if err != nil {
		// Creating the namespaces is the first thing the kernel may
		// refuse (no privilege, no user namespaces here).
		// The room binary is named: the error's own path is only
		// /proc/self/fd/N, and an exec it refuses (a file being
		// written: ETXTBSY) is not the namespaces' fault.
		return fmt.Errorf("starting %s in new namespaces: %w: %w", what, errNoIsolation, err)
	}
	stop := o.Stop
	for {
		select {
		case err := <-waited:
			return exitErr(err)
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case <-stop:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			stop = nil
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			// Reaped; its status is the kill's, named after the cause.
			return fmt.Errorf("%w (the room was killed: %v)", ctx.Err(), <-waited)
		}
	}
}

func exitErr(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Exited() {
			return &ExitError{Code: st.ExitStatus()}
		}
		return fmt.Errorf("sealed server: %w", err)
	}
	return err
}

func (o *ServeOptions) check() error {
	if o.Limits == (Limits{}) {
		o.Limits = DefaultLimits
	}
	// Before any namespace is made: the room would refuse them anyway.
	if err := o.Limits.check(); err != nil {
		return err
	}
	if o.ViewBytes == 0 {
		o.ViewBytes = DefaultViewBytes
	}
	// A negative size would also make the stages' memory limit negative,
	// that is no limit at all with the collector's pacing off.
	if o.ViewBytes < 0 {
		return fmt.Errorf("view size %d is negative", o.ViewBytes)
	}
	if o.RootLabel == "" {
		o.RootLabel = pkgwalk.DefaultRootLabel
	}
	for name, p := range map[string]string{"package": o.PackageDir, "workspace": o.Workspace} {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("%s path %q is not absolute", name, p)
		}
	}
	if o.Transcript != "" && !filepath.IsAbs(o.Transcript) {
		return fmt.Errorf("transcript path %q is not absolute", o.Transcript)
	}
	if err := pkgwalk.CheckID(o.Expect); err != nil {
		return err
	}
	return nil
}

// checkOutside refuses a workspace or transcript inside the package: writing
// there would change the package on disk (the next emission would not be the
// pinned bpkg), and the records of a run belong beside what it measured.
func (o *ServeOptions) checkOutside() error {
	for _, out := range []string{o.Workspace, o.Transcript} {
		if out == "" {
			continue
		}
		inside, err := pkgwalk.IsInside(o.PackageDir, out)
		if err != nil {
			return fmt.Errorf("checking %s against the package: %w", out, err)
		}
		if inside {
			return &pkgwalk.RefusalError{Path: out, Rule: pkgwalk.ErrOutputInside}
		}
	}
	return nil
}

func (o *ServeOptions) flags(mount string) []string {
	return []string{
		"--package", o.PackageDir, "--expect", o.Expect, "--root-label", o.RootLabel,
		"--mount", mount, "--workspace", o.Workspace, "--transcript", o.Transcript,
		"--view-bytes", strconv.FormatInt(o.ViewBytes, 10),
		"--max-file-bytes", strconv.Itoa(o.Limits.MaxFileBytes),
		"--max-total-bytes", strconv.Itoa(o.Limits.MaxTotalBytes),
		"--max-files", strconv.Itoa(o.Limits.MaxFiles),
		"--max-writes", strconv.Itoa(o.Limits.MaxWrites),
		"--max-path-bytes", strconv.Itoa(o.Limits.MaxPathBytes),
		"--max-depth", strconv.Itoa(o.Limits.MaxDepth),
		"--resume=" + strconv.FormatBool(o.Resume),
		"--max-session-calls", strconv.Itoa(o.Limits.MaxSessionCalls),
		"--max-session-bytes", strconv.Itoa(o.Limits.MaxSessionBytes),
	}
}

// stageConfig is ServeOptions as the stages read them back.
type stageConfig struct {
	ServeOptions
	mount string
}

func parseStage(args []string) (*stageConfig, error) {
	fs := flag.NewFlagSet("sealed-stage", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := &stageConfig{}
	fs.StringVar(&c.PackageDir, "package", "", "")
	fs.StringVar(&c.Expect, "expect", "", "")
	fs.StringVar(&c.RootLabel, "root-label", "", "")
	fs.StringVar(&c.mount, "mount", "", "")
	fs.StringVar(&c.Workspace, "workspace", "", "")
	fs.StringVar(&c.Transcript, "transcript", "", "")
	fs.Int64Var(&c.ViewBytes, "view-bytes", 0, "")
	fs.IntVar(&c.Limits.MaxFileBytes, "max-file-bytes", 0, "")
	fs.IntVar(&c.Limits.MaxTotalBytes, "max-total-bytes", 0, "")
	fs.IntVar(&c.Limits.MaxFiles, "max-files", 0, "")
	fs.IntVar(&c.Limits.MaxWrites, "max-writes", 0, "")
	fs.IntVar(&c.Limits.MaxPathBytes, "max-path-bytes", 0, "")
	fs.IntVar(&c.Limits.MaxDepth, "max-depth", 0, "")
	fs.BoolVar(&c.Resume, "resume", false, "")
	fs.IntVar(&c.Limits.MaxSessionCalls, "max-session-calls", 0, "")
	fs.IntVar(&c.Limits.MaxSessionBytes, "max-session-bytes", 0, "")
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("sealed stage arguments: %w", err)
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(c.mount) {
		return nil, fmt.Errorf("mount point %q is not absolute", c.mount)
	}
	return c, nil
}

// RunStage runs one stage of the sealed server in this process and returns
// its exit status: args[0] is "seal" or "serve", prefix is the argument
// prefix that brought the binary here (needed to exec the next stage).
// Status 1 means the package or prompt was refused, 2 that the environment
// could not establish the seal.
func RunStage(prefix []string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// No allocation profile is ever read from the room; its sampling
	// buckets would hold about 1.4 MiB of the serving process's memory.
	runtime.MemProfileRate = 0
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "cleanroom: sealed room: %v\n", err)
		return code
	}
	if len(args) == 0 {
		return fail(2, errors.New("no stage named"))
	}
	// Before anything else: no inherited descriptor survives the next exec.
	if err := seal.CloseInheritedFDs(); err != nil {
		return fail(2, err)
	}
	c, err := parseStage(args[1:])
	if err != nil {
		return fail(2, err)
	}
	debug.SetMemoryLimit(startupMemoryLimit(c.ViewBytes))
	switch args[0] {
	case "seal":
		return sealStage(prefix, args[1:], c, fail)
	case "serve":
		return serveStage(c, stdin, stdout, fail)
	}
	return fail(2, fmt.Errorf("unknown stage %q", args[0]))
}

// sealStage runs in the fresh namespaces with the privileges it was
// started with: it isolates, mounts, emits, seals, asserts, and execs the
// serve stage with every privilege dropped.
func sealStage(prefix, args []string, c *stageConfig, fail func(int, error) int) int {
	if err := seal.AssertIsolatedFrom(os.Getppid()); err != nil {
		return fail(ExitNoIsolation, err)
	}
	if err := seal.MakeRootPrivate(); err != nil {
		return fail(ExitNoIsolation, err)
	}
	if err := seal.AssertNoNetwork(); err != nil {
		return fail(ExitNoIsolation, err)
	}
	_, err := seal.Seal(c.mount, c.ViewBytes, func(dir string) error {
		// Delivered, not yet measured: the serve stage measures the view
		// once it is sealed (pkgwalk.OpenView) and refuses it unless it is
		// the pinned bpkg, so nothing is served that was not measured
		// after it could no longer change.
		return pkgwalk.Deliver(context.Background(), c.PackageDir, dir, pkgwalk.EmitOptions{})
	})
	if err != nil {
		// A refused package is the input's fault (1); a view that could not
		// be mounted, sealed or asserted is this machine's (ExitNoIsolation).
		if code := refusalCode(err); code == 1 {
			return fail(1, err)
		}
		return fail(ExitNoIsolation, err)
	}
	next := append([]string{"/proc/self/exe"}, prefix...)
	next = append(next, "serve")
	next = append(next, args...)
	err = seal.ExecUnprivileged(next, stageEnv)
	// Privileges that cannot be dropped are isolation that cannot be had.
	return fail(ExitNoIsolation, err)
}

// ExitNoIsolation is the sealed stage's exit status when this machine
// cannot establish the room's isolation (namespaces, the private
// read-only view, dropped privileges): the command's exit 3.
const ExitNoIsolation = 3

// errNoIsolation is wrapped by Serve's error when the sealed server could
// not even be started in its new namespaces.
var errNoIsolation = fault.New(fault.NoIsolation, "this machine cannot establish the clean room's isolation")

// refusalCode is 1 for a refusal of the input (package, pin, prompt,
// workspace: all *pkgwalk.RefusalError), 2 for anything else.
func refusalCode(err error) int {
	var re *pkgwalk.RefusalError
	var probs pkgwalk.Problems
	if errors.As(err, &re) || errors.As(err, &probs) {
		return 1
	}
	return 2
}

// serveStage runs with no privileges in the sealed namespaces: it asserts
// that, verifies the final view as its first act on the package, keeps the
// verified bytes, and serves them over MCP on stdio.
func serveStage(c *stageConfig, stdin io.Reader, stdout io.Writer, fail func(int, error) int) int {
	// The relay's death ends the room (the setting does not survive exec):
	// a room that cannot promise that does not serve.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fail(2, fmt.Errorf("prctl(PR_SET_PDEATHSIG): %w", err))
	}
	if err := seal.AssertUnprivileged(); err != nil {
		return fail(2, err)
	}
	if err := seal.AssertNoNetwork(); err != nil {
		return fail(2, err)
	}
	room, err := openSealedRoom(c)
	if err != nil {
		// A seal that cannot be asserted is not a refusal of the input (2).
		return fail(refusalCode(err), err)
	}
	debug.SetMemoryLimit(serveMemoryLimit(room.View, runtimeInUse()))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if stdin == io.Reader(os.Stdin) && stdout == io.Writer(os.Stdout) {
		stdin, stdout = pollableStdio()
	}
	err = room.Serve(ctx, stdin, stdout)
	if cerr := room.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, errSessionBudget) {
		// The client's flood, refused by name; the transcript is whole.
		return fail(fault.ExitCode(err), err)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return fail(2, err)
	}
	return 0
}

// openSealedRoom opens the view's mount point once, asserts the seal on
// that descriptor, and opens the room from the same descriptor: the mount
// point's path is resolved once, so what is measured and served is the
// mount the kernel vouched for, whatever the path names afterwards.
func openSealedRoom(c *stageConfig) (*Room, error) {
	dir, sealed, err := seal.OpenSealed(c.mount)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	if testAfterAssert != nil {
		testAfterAssert(c.mount)
	}
	return OpenRoom(RoomConfig{ViewDir: dir, RootLabel: c.RootLabel, Expect: c.Expect, Workspace: c.Workspace,
		Transcript: c.Transcript, Limits: c.Limits, Seal: sealed, Resume: c.Resume})
}

// testAfterAssert, set only by tests, runs between the seal's assertion
// and the measurement of the view, with the mount point's path.
var testAfterAssert func(mount string)

// RoomConfig says what OpenRoom opens.
type RoomConfig struct {
	// ViewDir is the view, open (the serve stage's descriptor, the one the
	// seal was asserted on); it stays the caller's.
	ViewDir    *os.File
	RootLabel  string // the manifest's root label; "" = pkgwalk.DefaultRootLabel
	Expect     string // the pinned bpkg
	Workspace  string // created here; must not exist
	Transcript string // "" for none
	Limits     Limits
	Seal       *seal.Assertion // what the kernel said of the view, recorded in the transcript
	// Resume reopens the workspace and appends to the transcript of an
	// interrupted session instead of creating them.
	Resume bool
}

// OpenRoom measures the view (every rule of the package walk, every file
// read and hashed once; its identity must be Expect), reads the prompt out
// of the measured bytes, and creates the workspace and the transcript.
func OpenRoom(c RoomConfig) (*Room, error) {
	if err := c.Limits.check(); err != nil {
		return nil, err
	}
	view, err := pkgwalk.OpenViewAt(c.ViewDir, c.RootLabel, c.Expect)
	if err != nil {
		return nil, err
	}
	prompt, promptSHA, err := LoadPrompt(view)
	if err != nil {
		return nil, err
	}
	open, openTranscript := CreateWorkspace, CreateTranscript
	if c.Resume {
		open, openTranscript = ReopenWorkspace, ResumeTranscript
	}
	ws, err := open(c.Workspace, c.Limits)
	if err != nil {
		return nil, err
	}
	// The workspace was created empty a moment ago: on a refusal it is
	// removed, so that a refused room leaves nothing and its retry is not
	// refused for the workspace (rmdir removes only an empty one). A
	// resumed one is the earlier session's and stays.
	drop := func(err error) (*Room, error) {
		_ = ws.Close() // releases the descriptor; err is the refusal reported
		if !c.Resume {
			_ = unix.Rmdir(c.Workspace)
		}
		return nil, err
	}
	r := &Room{View: view, Prompt: prompt, Workspace: ws, Limits: c.Limits}
	if c.Transcript != "" {
		// Checked once the workspace exists: a path through a link into
		// it resolves only now.
		inside, err := pkgwalk.IsInside(c.Workspace, c.Transcript)
		if err != nil {
			return drop(fmt.Errorf("checking transcript %s against the workspace: %w", c.Transcript, err))
		}
		if inside {
			return drop(&pkgwalk.RefusalError{Path: c.Transcript, Rule: errTranscriptInWorkspace})
		}
		h := TranscriptHeader{
			BlindPackageID: view.ID, SealDigest: view.SealDigest(), ServedFileCount: len(view.Files),
			InstructionPath: PromptPath, InstructionSHA256: promptSHA, Workspace: c.Workspace,
		}
		if c.Seal != nil {
			h.ViewMountInfo = c.Seal.MountInfo
		}
		r.Transcript, err = openTranscript(c.Transcript, h)
		if errors.Is(err, unix.EEXIST) {
			return drop(&pkgwalk.RefusalError{Path: c.Transcript, Rule: errTranscriptExists})
		}
		if err != nil {
			return drop(err)
		}
	}
	return r, nil
}

// Serve answers MCP on the given streams until the client goes away.
// Inbound frames are lines, capped (lineTransport): a frame that is not
// JSON is answered with a parse error, a batch is served only under the
// revision that requires it and within a memory budget (else refused with
// errFrameBatch named), a method the room does not serve is refused
// (errMethodNotServed), and no message is read while a call is unanswered
// (gatedConn).
func (r *Room) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	s := NewServer(r)
	maxLine := 6*r.Limits.MaxFileBytes + 64<<10 // JSON may escape a byte as \u00XX
	// As the SDK's StdioTransport: ending the session closes stdin (which
	// ends a blocked read), never stdout.
	rc := io.NopCloser(in)
	if f, ok := in.(*os.File); ok && f == os.Stdin {
		rc = f
	}
	t := gatedTransport{Transport: lineTransport{r: rc, w: out, maxLine: maxLine}, ended: r.ended}
	err := s.Run(ctx, t)
	if berr := r.ended(); berr != nil {
		// The room ended the session: its budget is spent.
		return berr
	}
	if err != nil && (errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed)) {
		return nil
	}
	return err
}

// pollableStdio returns stdin and stdout as files the Go runtime polls
// (O_NONBLOCK, parked in the netpoller) when they are pipes or sockets.
//
// Why: a blocking read(2) on stdin is a long system call, and Go 1.26's
// stop-the-world can miss a goroutine that enters one at the wrong instant.
// reentersyscall checks sched.gcwaiting before it marks the goroutine
// _Gsyscall; stopTheWorldWithSema sets gcwaiting and then tries, once, to
// take each P whose goroutine is already _Gsyscall. A goroutine between the
// two steps is missed, then blocks in read(2); the stop-the-world loop only
// re-preempts (a signal the restarted read ignores), and sysmon, seeing
// gcwaiting, sleeps forcegcperiod/2 = 60 s before it retakes the P. The
// client waits for the answer the stopped world owes it, so it sends nothing
// to end the read: the call stalls for 60 s (seen here about once in 2e5
// calls, and in research/mcp.md). With the descriptor non-blocking the
// reader parks in the poller instead of a system call, and the window is
// gone. A terminal or regular file stays as it is (O_NONBLOCK on a shared
// terminal would leak to the shell).
func pollableStdio() (io.Reader, io.Writer) {
	pollable := func(fd int, name string, std *os.File) *os.File {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return std
		}
		if t := st.Mode & unix.S_IFMT; t != unix.S_IFIFO && t != unix.S_IFSOCK {
			return std
		}
		if err := unix.SetNonblock(fd, true); err != nil {
			return std
		}
		// NewFile of a non-blocking descriptor registers it with the poller.
		return os.NewFile(uintptr(fd), name)
	}
	return pollable(0, "stdin", os.Stdin), pollable(1, "stdout", os.Stdout)
}

// Close ends the session's records.
func (r *Room) Close() error {
	err := r.Transcript.Close()
	if werr := r.Workspace.Close(); err == nil {
		err = werr
	}
	return err
}
