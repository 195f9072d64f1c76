package harness

import (
	"context"
	"fmt"
	"os"
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
// Go SDK client; reports p50/p99/max latency, calls over 100 ms (the stall
// the research saw) and the server's peak RSS.
func BenchmarkReadFile(b *testing.B) {
	needSeal(b)
	pkg, id := writePackage(b, benchFiles())
	s := startSession(b, pkg, id)
	var lat []time.Duration
	i := 0
	start := time.Now()
	for b.Loop() {
		p := fmt.Sprintf("spec/file_%02d.txt", i%60)
		i++
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		t0 := time.Now()
		r, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": p}})
		lat = append(lat, time.Since(t0))
		cancel()
		if err != nil || r.IsError || len(r.Content[0].(*mcp.TextContent).Text) != 2000 {
			b.Fatalf("read %s: %v", p, err)
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
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.serverPID(b))); err == nil {
		for _, l := range strings.Split(string(st), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
				kb, _ := strconv.Atoi(f[1])
				b.ReportMetric(float64(kb)/1024, "server-rss-MiB")
			}
		}
	}
}
