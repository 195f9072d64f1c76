package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// inspector returns the pinned MCP Inspector CLI (testdata/inspector,
// installed by `npm ci` there), or skips.
func inspector(t *testing.T) string {
	t.Helper()
	bin, _ := filepath.Abs(filepath.Join("testdata", "inspector", "node_modules", ".bin", "mcp-inspector"))
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("MCP Inspector CLI not installed (run `npm ci` in harness/testdata/inspector): %v", err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skipf("node not found: %v", err)
	}
	return bin
}

// TestInspectorCLI drives the room with the MCP Inspector CLI, a second,
// independent MCP client (TypeScript SDK): --strict schema lint, the tools
// as declared, a read, a refused traversal, and a write.
func TestInspectorCLI(t *testing.T) {
	t.Parallel()
	bin := inspector(t)
	needSeal(t)
	files := testFiles()
	pkg, id := writePackage(t, files)
	run := func(t *testing.T, ws string, args ...string) (int, []byte, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		full := append([]string{"--cli", "--format", "json", "-q"}, args...)
		cmd := exec.CommandContext(ctx, bin, full...)
		cmd.Dir = filepath.Join("testdata", "inspector")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), out.Bytes(), errb.String()
		}
		if err != nil {
			t.Fatalf("inspector: %v", err)
		}
		return 0, out.Bytes(), errb.String()
	}
	server := func(ws string) []string {
		return []string{os.Args[0], serveMarker, pkg, id, ws, ""}
	}
	t.Run("strict tools/list", func(t *testing.T) {
		ws := filepath.Join(t.TempDir(), "ws")
		code, out, stderr := run(t, ws, append(append([]string{"--strict"}, server(ws)...), "--method", "tools/list")...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var doc struct {
			Result struct {
				Tools []struct{ Name, Description string } `json:"tools"`
			} `json:"result"`
		}
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		got := map[string]string{}
		for _, tl := range doc.Result.Tools {
			got[tl.Name] = tl.Description
		}
		want := map[string]string{"list_files": testListDesc, "read_file": testReadDesc, "write_source": testWriteDesc}
		if len(got) != 3 || got["list_files"] != want["list_files"] || got["read_file"] != want["read_file"] || got["write_source"] != want["write_source"] {
			t.Errorf("tools %v, want %v", got, want)
		}
	})
	t.Run("read every file", func(t *testing.T) {
		for p, b := range files {
			ws := filepath.Join(t.TempDir(), "ws")
			code, out, stderr := run(t, ws, append(server(ws), "--method", "tools/call", "--tool-name", "read_file", "--tool-arg", "path="+p)...)
			if code != 0 {
				t.Fatalf("%s: exit %d: %s", p, code, stderr)
			}
			var doc struct {
				Result struct {
					Content []struct {
						Type     string
						Text     string
						Resource struct{ Blob []byte }
					} `json:"content"`
				} `json:"result"`
			}
			if err := json.Unmarshal(out, &doc); err != nil || len(doc.Result.Content) != 1 {
				t.Fatalf("%s: %s (%v)", p, out, err)
			}
			c := doc.Result.Content[0]
			got := []byte(c.Text)
			if c.Type == "resource" {
				got = c.Resource.Blob // base64 on the wire, decoded by encoding/json
			}
			if sha(got) != sha(b) {
				t.Errorf("%s via the inspector: sha256 %s, want %s", p, sha(got), sha(b))
			}
		}
	})
	t.Run("refused traversal", func(t *testing.T) {
		ws := filepath.Join(t.TempDir(), "ws")
		code, out, stderr := run(t, ws, append(server(ws), "--method", "tools/call", "--tool-name", "read_file", "--tool-arg", "path=../spec/ADD.md")...)
		if code == 0 || !strings.Contains(stderr, "tool_is_error") || !strings.Contains(string(out), `\"../spec/ADD.md\"`) {
			t.Errorf("exit %d, stdout %s, stderr %s; want a tool error naming the key", code, out, stderr)
		}
	})
	t.Run("write", func(t *testing.T) {
		ws := filepath.Join(t.TempDir(), "ws")
		code, _, stderr := run(t, ws, append(server(ws), "--method", "tools/call", "--tool-name", "write_source", "--tool-args-json", `{"path":"cmd/main.go","content":"package main\n"}`)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if b, err := os.ReadFile(filepath.Join(ws, "cmd", "main.go")); err != nil || string(b) != "package main\n" {
			t.Errorf("workspace: %q, %v", b, err)
		}
	})
}
