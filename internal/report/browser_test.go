package report

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chromium runs Debian's headless Chromium on file with extra flags and
// returns stdout and stderr. The flags keep it off the network (the
// machine's network is closed; background services would only log
// refusals) and give it a fresh profile.
func chromium(t *testing.T, file string, extra ...string) (string, string) {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (Debian package chromium): the page is not rendered")
	}
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0", "--window-size=1280,1600"}, extra...)
	args = append(args, "file://"+file)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", extra, err, errb.String())
	}
	return out.String(), errb.String()
}

// consoleMessages are the page's console lines in Chromium's log: every
// error, warning, CSP violation and blocked fetch is one.
func consoleMessages(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, ":CONSOLE") {
			out = append(out, l)
		}
	}
	return out
}

// distinctColours counts the colours of a PNG (up to limit).
func distinctColours(t *testing.T, file string, limit int) int {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
			if len(seen) >= limit {
				return len(seen)
			}
		}
	}
	return len(seen)
}

// The report renders in a real browser: a screenshot with content, the DOM
// carrying the run, and not one console message (a blocked fetch, a CSP
// violation or a script would each log one). A control page with a
// forbidden image and an inline script proves the scan sees them.
func TestReportInChromium(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	control := filepath.Join(dir, "control.html")
	if err := os.WriteFile(control, []byte(`<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="`+CSP+`"></head>`+
		`<body><p>control</p><img src="http://127.0.0.1:9/x.png"><script>console.error("boom")</script></body></html>`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, log := chromium(t, control, "--dump-dom"); len(consoleMessages(log)) < 2 {
		t.Fatalf("the console scan does not see a blocked image and a blocked script:\n%s", log)
	}

	w := revealedWorld(t)
	completeWorld(t, w, hostile)
	rec, err := w.ReadRecord()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Gather(context.Background(), w, Options{Transcript: writeTranscript(t, rec.BlindPackageID)})
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "report.html")
	if err := WriteFile(page, false, r.HTML); err != nil {
		t.Fatal(err)
	}
	// One start renders the page, dumps its DOM and takes the screenshot
	// (a Chromium start costs seconds of CPU; the two outputs are of the
	// same rendering).
	shot := filepath.Join(dir, "report.png")
	dom, log := chromium(t, page, "--dump-dom", "--screenshot="+shot, "--hide-scrollbars")
	if msgs := consoleMessages(log); len(msgs) > 0 {
		t.Errorf("console messages while rendering the report:\n%s", strings.Join(msgs, "\n"))
	}
	for _, want := range []string{r.RunID, "H4.candidate", "GO_PRODUCER_DEFECT", "&lt;script&gt;alert(1)&lt;/script&gt;"} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
	if strings.Contains(dom, "<script") || strings.Contains(dom, "<img") {
		t.Errorf("the rendered DOM has a script or image element")
	}
	// A page that rendered shows text in several colours (header, pills,
	// table rules); a blank or failed render is one or two.
	if n := distinctColours(t, shot, 50); n < 20 {
		t.Errorf("screenshot has %d distinct colours: the page did not render", n)
	}
}
