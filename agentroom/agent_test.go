package agentroom

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/bench/mcpclient"
	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/harness"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/cleanroom-dev/cleanroom/sandbox"
)

func TestOptionsRefused(t *testing.T) {
	t.Parallel()
	// says is what the refusal must name, so a case cannot pass on
	// another option's refusal.
	cases := []struct {
		name   string
		change func(o *Options)
		says   string
	}{
		{"no command", func(o *Options) { o.Command = nil }, "no agent command"},
		{"no transcript", func(o *Options) { o.Room.Transcript = "" }, "a transcript is required"},
		{"relative relay", func(o *Options) { o.Relay = "cleanroom" }, `relay binary "cleanroom"`},
		{"bind over the relay", func(o *Options) { o.Binds = []sandbox.Bind{{Source: "/usr", Destination: "/opt/cleanroom/x"}} }, "/opt/cleanroom is room agent's"},
		{"proxy variable", func(o *Options) { o.Env = []string{"https_proxy=http://elsewhere:1"} }, "the proxy variables are set by room agent"},
		{"HOME", func(o *Options) { o.Env = []string{"HOME=/root"} }, "--env HOME: set by the sandbox"},
		{"existing workspace", func(o *Options) { o.Room.Workspace = t.TempDir() }, "exists (or cannot be checked"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, _, _ := testOptions(t, "/bin/true")
			c.change(&o)
			res, err := Run(context.Background(), o)
			if !errors.Is(err, errAgentOptions) || res != nil || !strings.Contains(err.Error(), c.says) {
				t.Errorf("Run: %v, %v; want errAgentOptions naming %q", res, err, c.says)
			}
			if _, err := os.Stat(o.Room.Transcript); o.Room.Transcript != "" && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused session left a transcript")
			}
		})
	}
}

// TestRefusedPackage: the preflight finds a package the room refuses
// before the agent runs; nothing is created.
func TestRefusedPackage(t *testing.T) {
	t.Parallel()
	needAgentRoom(t)
	o, _, stderr := testOptions(t, "/bin/sh", "-c", "exit 0")
	o.Room.Expect = "bpkg-" + "0000000000000000000000000000000000000000000000000000000000000000"
	res, err := Run(context.Background(), o)
	var ee *harness.ExitError
	if !errors.As(err, &ee) || ee.Code != 1 || res != nil {
		t.Fatalf("Run: %+v, %v; want the room's refusal (exit 1) before the agent\n%s", res, err, stderr)
	}
	if !strings.Contains(stderr.String(), string(pkgwalk.ErrNotPinned)) {
		t.Errorf("stderr does not name %q: %s", pkgwalk.ErrNotPinned, stderr)
	}
	for _, p := range []string{o.Room.Workspace, o.Room.Transcript} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after a refused session", p)
		}
	}
}

// TestAgentNeverConnects: an agent that never reaches the room still
// leaves a record — a session with no call, and the agent line.
func TestAgentNeverConnects(t *testing.T) {
	t.Parallel()
	needAgentRoom(t)
	o, _, _ := testOptions(t, "/bin/sh", "-c", "exit 3")
	res := runSession(t, o)
	if res.Sandbox.ExitCode != 3 || res.RelayConnections != 0 {
		t.Errorf("sandbox %+v, relay connections %d", res.Sandbox, res.RelayConnections)
	}
	doc := readTranscript(t, o.Room.Transcript)
	access, _ := doc.Get("access")
	agent, ok := doc.Get("agent")
	if c, _ := doc.Get("complete"); c != true || len(access.([]any)) != 0 || !ok {
		t.Fatalf("transcript complete %v, access %v, agent line %v", c, access, ok)
	}
	sb, _ := agent.(*evidence.Object).Get("sandbox")
	if code, _ := sb.(*evidence.Object).Get("exit_code"); code != float64(3) {
		t.Errorf("agent line's exit code %v, want 3", code)
	}
	// The strict reader takes one agent line, after the end line, and no
	// drive line beside it.
	b, err := os.ReadFile(o.Room.Transcript)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	agentLine := lines[len(lines)-2]
	for name, tampered := range map[string]string{
		"second agent line":     string(b) + agentLine,
		"drive after the agent": string(b) + `{"event":"drive"}` + "\n",
		"agent before the end":  strings.Join(lines[:len(lines)-3], "") + agentLine + lines[len(lines)-3],
	} {
		// The rule: the agent line is the record's last.
		const rule = "line after the agent line"
		if _, err := harness.ReadTranscript([]byte(tampered)); err == nil || !strings.Contains(err.Error(), "malformed transcript") || !strings.Contains(err.Error(), rule) {
			t.Errorf("%s: ReadTranscript = %v, want a malformed transcript naming %q", name, err, rule)
		}
	}
}

// listAndWaitMain is an agent that reads a file through the relay and
// then waits, its MCP session open, to be killed (an agent still thinking).
func listAndWaitMain() int {
	c, err := mcpclient.Start(exec.Command(RelayPath, RelayArgs...))
	if err == nil {
		err = c.Initialize(context.Background())
	}
	if err == nil {
		_, err = c.CallTool(context.Background(), "read_file", map[string]any{"path": benchFile})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("read")
	time.Sleep(time.Hour)
	return 0
}

// signalWriter closes seen once a write holds want.
type signalWriter struct {
	want string
	seen chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// TestAgentInterrupted: cancelling a session (room agent's SIGINT) kills
// the agent; the room's record is whole and the agent line appended.
func TestAgentInterrupted(t *testing.T) {
	t.Parallel()
	needAgentRoom(t)
	o, _, stderr := testOptions(t, RelayPath, "list-and-wait")
	seen := &signalWriter{want: "read", seen: make(chan struct{})}
	o.Stdout = seen
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-seen.seen:
		case <-time.After(2 * time.Minute):
		}
		cancel()
	}()
	res, err := Run(ctx, o)
	if !errors.Is(err, context.Canceled) || res == nil || res.Sandbox == nil || res.Sandbox.Status != sandbox.StatusSignaled {
		t.Fatalf("Run: %+v, %v; want the agent killed and context.Canceled\n%s", res, err, stderr)
	}
	doc := readTranscript(t, o.Room.Transcript)
	access, _ := doc.Get("access")
	if c, _ := doc.Get("complete"); c != true || len(access.([]any)) != 1 {
		t.Errorf("transcript complete %v, access %v; want complete with the one read_file", c, access)
	}
	agent, ok := doc.Get("agent")
	if !ok {
		t.Fatalf("no agent line")
	}
	// The agent's MCP client started the relay on pipes: the room was
	// handed them, and the relay left the data path.
	if m, _ := agent.(interface{ Get(string) (any, bool) }).Get("relay_mode"); m != relayHanded || res.RelayMode != relayHanded {
		t.Errorf("relay mode %v (result %q), want %q", m, res.RelayMode, relayHanded)
	}
}
