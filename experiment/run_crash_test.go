package experiment

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// crashWorldEnv makes the test binary a transition driver (TestCrashChild)
// instead of a test run.
const crashWorldEnv = "CLEANROOM_CRASH_CHILD_WORLD"

// TestCrashChild is not a test: re-executed by TestCrashConsistency with
// crashWorldEnv set, it drives the world through transitions as fast as it
// can, printing "BEGIN op" before and "ACK run_id status" after each one
// (an ACK is printed only once the transition returned: receipt and record
// durable), until it is killed.
func TestCrashChild(t *testing.T) {
	t.Parallel()
	dir := os.Getenv(crashWorldEnv)
	if dir == "" {
		t.Skip("helper process for TestCrashConsistency")
	}
	w, err := OpenWorld(dir)
	if err != nil {
		fmt.Println("FATAL", err)
		os.Exit(3)
	}
	ref := referenceSpec(t, w)
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "READY")
	out.Flush()
	for i := 0; ; i++ {
		var op string
		var tr *Transition
		r, err := w.ReadRecord()
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		switch {
		case err != nil || r.Status.Terminal():
			op = "pin"
			fmt.Fprintln(out, "BEGIN", op)
			out.Flush()
			tr, err = Pin(c, w, PinOptions{Reference: ref})
		case r.Status == StatusPinned:
			op = "freeze"
			fmt.Fprintln(out, "BEGIN", op)
			out.Flush()
			o := freezeOpts()
			o.ToolVersion = fmt.Sprintf("v%d", rand.Int64())
			tr, err = Freeze(c, w, o)
		case r.Status == StatusCandidateFrozen:
			op = "reveal"
			fmt.Fprintln(out, "BEGIN", op)
			out.Flush()
			tr, err = Reveal(c, w, RevealOptions{})
		default:
			op = "abort"
			fmt.Fprintln(out, "BEGIN", op)
			out.Flush()
			tr, err = Abort(c, w, "crash test cycle", TransitionOptions{})
		}
		cancel()
		if err != nil {
			fmt.Fprintln(out, "FATAL", op, strings.ReplaceAll(err.Error(), "\n", " | "))
			out.Flush()
			os.Exit(3)
		}
		fmt.Fprintln(out, "ACK", tr.RunID, tr.Status, tr.ReceiptSHA256)
		out.Flush()
	}
}

type ack struct{ runID, status, sha string }

// TestCrashConsistency kills a real transition process (this test binary,
// re-executed) with SIGKILL at a random instant, hundreds of times, on
// four worlds (each its own chain of kills; the chains run in parallel so
// that their waits overlap). After every kill the world must verify
// (temporary files of the interrupted transition are only ever explained,
// never published), every acknowledged receipt must be on disk with the
// bytes acknowledged, and the record must be the last acknowledged
// transition or the one that was in flight — never an earlier state.
func TestCrashConsistency(t *testing.T) {
	t.Parallel()
	iterations := 200
	if testing.Short() {
		iterations = 40
	}
	const worlds = 4
	var totalAcks, midFlight atomic.Int64
	t.Run("worlds", func(t *testing.T) {
		for k := range worlds {
			t.Run(fmt.Sprint(k), func(t *testing.T) {
				t.Parallel()
				acks, mid := crashChain(t, uint64(k), iterations/worlds)
				totalAcks.Add(int64(acks))
				midFlight.Add(int64(mid))
			})
		}
	})
	if t.Failed() {
		return
	}
	if int(totalAcks.Load()) < iterations/2 || int(midFlight.Load()) < iterations/4 {
		t.Errorf("the kills did not exercise the transitions: %d acknowledged, %d killed mid-transition over %d runs", totalAcks.Load(), midFlight.Load(), iterations)
	}
	t.Logf("%d iterations, %d acknowledged transitions, %d kills mid-transition", iterations, totalAcks.Load(), midFlight.Load())
}

// crashChain kills the transitions of one new world iterations times and
// returns the acknowledged transitions and the kills mid-transition.
func crashChain(t *testing.T, seed uint64, iterations int) (totalAcks, midFlight int) {
	w := newWorld(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2+seed))
	var last *ack
	// est is how long one transition takes on this machine, learned from
	// the acknowledged ones: the kill instant is drawn from [0, 3*est) so
	// the kills land inside transitions and some transitions complete
	// whatever the machine's speed (the race detector makes them several
	// times slower). Nothing is asserted about time.
	est := 20 * time.Millisecond
	for i := range iterations {
		cmd := exec.Command(exe, "-test.run=^TestCrashChild$", "-test.count=1")
		// GOGC=off: the driver lives for a few transitions before its kill;
		// collecting its start-up garbage (the schema compiler's init) is CPU
		// spent on nothing the test checks.
		cmd.Env = append(os.Environ(), crashWorldEnv+"="+w.Root, "GOGC=off")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		type line struct {
			text string
			at   time.Time
		}
		lines := make(chan line, 1024)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- line{sc.Text(), time.Now()}
			}
			close(lines)
		}()
		// The random instant is measured from the driver's first
		// transition, not from process start, so a slow machine still kills
		// inside transitions.
		select {
		case l := <-lines:
			if l.text != "READY" {
				t.Fatalf("iteration %d: driver said %q", i, l.text)
			}
		case <-time.After(time.Minute):
			t.Fatalf("iteration %d: driver did not start", i)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(3 * est))))
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		inFlight := ""
		var began time.Time
		acks := 0
		for l := range lines {
			f := strings.Fields(l.text)
			switch {
			case len(f) == 2 && f[0] == "BEGIN":
				inFlight = f[1]
				began = l.at
			case len(f) == 4 && f[0] == "ACK":
				last = &ack{f[1], f[2], f[3]}
				inFlight = ""
				totalAcks++
				acks++
				est = (3*est + l.at.Sub(began)) / 4
				// The acknowledged receipt is on disk with the bytes acknowledged.
				b, err := os.ReadFile(filepath.Join(w.ReceiptsDir(), ReceiptFile(last.runID, Status(last.status))))
				if err != nil {
					t.Fatalf("iteration %d: acknowledged receipt lost: %v", i, err)
				}
				if got := sha256hex(b); got != last.sha {
					t.Fatalf("iteration %d: acknowledged receipt %s changed", i, last.runID)
				}
			case strings.HasPrefix(l.text, "FATAL"):
				t.Fatalf("iteration %d: the driver was refused: %s", i, l.text)
			}
		}
		if acks == 0 && est < 10*time.Second {
			est = est * 3 / 2
		}
		if inFlight != "" {
			midFlight++
		}
		rep, err := Verify(bg, w, VerifyOptions{SkipPackage: true})
		if err != nil {
			t.Fatal(err)
		}
		if last == nil {
			continue
		}
		if err := rep.Err(); err != nil {
			t.Fatalf("iteration %d (killed during %q): the world does not verify: %v", i, inFlight, err)
		}
		// Never an acknowledged transition lost: the record is the last
		// acknowledged state, a successor in its chain, or (a pin in flight
		// after a terminal run) a new run.
		if rep.RunID != last.runID {
			inChain := false
			for _, l := range rep.Chain {
				if l.Receipt.RunID == last.runID && string(l.Receipt.Status) == last.status {
					inChain = true
				}
			}
			newRun := rep.Status == StatusPinned && (last.status == string(StatusAborted) || last.status == string(StatusComplete))
			if !inChain && !newRun {
				t.Fatalf("iteration %d: record is %s %s, last acknowledged %s %s", i, rep.RunID, rep.Status, last.runID, last.status)
			}
		}
		// The state observed now is durable: the next iteration is checked
		// against it (a transition that completed without its ACK counts).
		last = &ack{rep.RunID, string(rep.Status), rep.Chain[0].SHA256}
	}
	return totalAcks, midFlight
}

func sha256hex(b []byte) string { return pkgwalk.SHA256Hex(b) }
