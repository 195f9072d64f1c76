package harness

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestRunScript(t *testing.T) {
	t.Parallel()
	needSeal(t)
	files := testFiles()
	pkg, id := writePackage(t, files)
	base := t.TempDir()
	ws, tpath := filepath.Join(base, "ws"), filepath.Join(base, "t.jsonl")
	res, err := RunScript(context.Background(), exec.Command(os.Args[0], serveMarker, pkg, id, ws, tpath), []ScriptCall{
		{"read_file", map[string]any{"path": "spec/ADD.md"}},
		{"read_file", map[string]any{"path": "spec/add.md"}},
		{"write_source", map[string]any{"path": "add.go", "content": "package add\n"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || res[0].Text != string(files["spec/ADD.md"]) || res[0].IsError || !res[1].IsError || res[2].IsError {
		t.Errorf("results %+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "add.go")); err != nil || string(b) != "package add\n" {
		t.Errorf("workspace add.go = %q, %v", b, err)
	}
	doc := readTranscript(t, tpath)
	if ev, _ := doc[len(doc)-1].Get("event"); ev != "end" {
		t.Errorf("transcript not completed after the script: last event %v", ev)
	}
}

// roomPackageID is the bpkg of testdata/room-package, the synthetic package
// the demo can serve; pinned here so an edit to it is noticed.
const roomPackageID = "bpkg-bf608ff8dd92dee2a27258aaed6d594ffcaea9b5975ae1728f5a772adaad86b4"

// TestRoomPackage serves the repository's synthetic room package and runs
// a scripted implementer through it.
func TestRoomPackage(t *testing.T) {
	t.Parallel()
	needSeal(t)
	pkg, err := filepath.Abs(filepath.Join("testdata", "room-package"))
	if err != nil {
		t.Fatal(err)
	}
	contract, err := os.ReadFile(filepath.Join(pkg, "experiment", "CONTRACT.md"))
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(t.TempDir(), "ws")
	res, err := RunScript(context.Background(), exec.Command(os.Args[0], serveMarker, pkg, roomPackageID, ws, ""), []ScriptCall{
		{"read_file", map[string]any{"path": "experiment/CONTRACT.md"}},
		{"write_source", map[string]any{"path": "sorted/sorted.go", "content": "package sorted\n"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Text != string(contract) || res[1].IsError {
		t.Errorf("results %+v", res)
	}
}
