package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// benchFiles is the peer comparison's corpus: 60 files of 2,000 bytes,
// plus the prompt.
func benchFiles() map[string][]byte {
	files := map[string][]byte{PromptPath: []byte(testPrompt(testSystem, testUser, goodTools...))}
	for i := range 60 {
		files[fmt.Sprintf("spec/file_%02d.txt", i)] = []byte(strings.Repeat(string(rune('a'+i%26)), 2000))
	}
	return files
}

// BenchmarkReadiness: from starting `room serve` (namespaces, emit, seal,
// assertions, privilege drop, verification) to the first list_files answer.
func BenchmarkReadiness(b *testing.B) {
	needSeal(b)
	pkg, id := writePackage(b, benchFiles())
	for b.Loop() {
		s := startSession(b, pkg, id)
		if r := s.call(b, "list_files", map[string]any{}); r.IsError {
			b.Fatal("list_files refused")
		}
		b.StopTimer()
		s.cs.Close()
		b.StartTimer()
	}
}

// BenchmarkReadFile: sequential read_file calls over the 60 files with one
// Go SDK client (the peer's twin is BenchmarkPeerReadFile).
func BenchmarkReadFile(b *testing.B) {
	needSeal(b)
	pkg, id := writePackage(b, benchFiles())
	s := startSession(b, pkg, id)
	readLoop(b, func(i int) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		r, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": fmt.Sprintf("spec/file_%02d.txt", i%60)}})
		if err != nil || r.IsError {
			return "", fmt.Errorf("read_file: %v", err)
		}
		return r.Content[0].(*mcp.TextContent).Text, nil
	}, s.serverPID(b))
}

// readLoop runs read for b.N sequential calls and reports p50/p99/max
// latency, calls over 100 ms (the stall the research saw), req/s and the
// peak RSS of process pid.
func readLoop(b *testing.B, read func(i int) (string, error), pid int) {
	var lat []time.Duration
	i := 0
	start := time.Now()
	for b.Loop() {
		t0 := time.Now()
		text, err := read(i)
		lat = append(lat, time.Since(t0))
		i++
		if err != nil || len(text) != 2000 {
			b.Fatalf("call %d: %v (%d bytes)", i, err, len(text))
		}
	}
	elapsed := time.Since(start)
	slices.Sort(lat)
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) / 1000 }
	outliers := 0
	for _, l := range lat {
		if l > 100*time.Millisecond {
			outliers++
		}
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(q(1), "max-ms")
	b.ReportMetric(float64(outliers), "calls>100ms")
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "req/s")
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(st), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
				kb, _ := strconv.Atoi(f[1])
				b.ReportMetric(float64(kb)/1024, "server-rss-MiB")
			}
		}
	}
}

// peerServer returns the command of the peer, @modelcontextprotocol/
// server-filesystem (pinned in testdata/inspector), serving dir, or skips.
func peerServer(b *testing.B, dir string) *exec.Cmd {
	b.Helper()
	js, _ := filepath.Abs(filepath.Join("testdata", "inspector", "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js"))
	if _, err := os.Stat(js); err != nil {
		b.Skipf("peer server not installed (npm ci in harness/testdata/inspector): %v", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		b.Skipf("node not found: %v", err)
	}
	return exec.Command(node, js, dir)
}

func connectPeer(b *testing.B, cmd *exec.Cmd) *mcp.ClientSession {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}).
		Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return cs
}

// BenchmarkPeerReadiness: the peer's start to its first directory listing,
// with the same client and files (it does no namespaces, seal or
// verification).
func BenchmarkPeerReadiness(b *testing.B) {
	pkg, _ := writePackage(b, benchFiles())
	peerServer(b, pkg)
	for b.Loop() {
		cs := connectPeer(b, peerServer(b, pkg))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_directory", Arguments: map[string]any{"path": filepath.Join(pkg, "spec")}})
		cancel()
		if err != nil || r.IsError {
			b.Fatalf("list_directory: %v", err)
		}
		b.StopTimer()
		cs.Close()
		b.StartTimer()
	}
}

// BenchmarkPeerReadFile: the peer's read_text_file over the same 60 files,
// same client, same metrics as BenchmarkReadFile.
func BenchmarkPeerReadFile(b *testing.B) {
	pkg, _ := writePackage(b, benchFiles())
	cmd := peerServer(b, pkg)
	cs := connectPeer(b, cmd)
	defer cs.Close()
	readLoop(b, func(i int) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": filepath.Join(pkg, fmt.Sprintf("spec/file_%02d.txt", i%60))}})
		if err != nil || r.IsError {
			return "", fmt.Errorf("read_text_file: %v", err)
		}
		return r.Content[0].(*mcp.TextContent).Text, nil
	}, cmd.Process.Pid)
}
