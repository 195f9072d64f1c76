package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBindsRefused: a bind outside /opt (over what the isolation relies
// on), through a symlink, or twice to one place is refused before anything
// runs.
func TestBindsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	if err := os.Symlink("/usr", link); err != nil {
		t.Fatal(err)
	}
	// says is what the refusal must name, so a case cannot pass on
	// another rule's refusal.
	const where = "want an absolute clean source and a distinct clean destination under /opt"
	const symlink = "symlinks are refused"
	cases := map[string]struct {
		binds []Bind
		says  string
	}{
		"over /usr":       {[]Bind{{Source: dir, Destination: "/usr"}}, where},
		"over /etc":       {[]Bind{{Source: dir, Destination: "/etc/x"}}, where},
		"/opt itself":     {[]Bind{{Source: dir, Destination: "/opt"}}, where},
		"dot-dot":         {[]Bind{{Source: dir, Destination: "/opt/../etc"}}, where},
		"relative source": {[]Bind{{Source: "usr", Destination: "/opt/usr"}}, where},
		"symlink source":  {[]Bind{{Source: link, Destination: "/opt/usr"}}, symlink},
		"twice":           {[]Bind{{Source: dir, Destination: "/opt/a"}, {Source: dir, Destination: "/opt/a"}}, where},
	}
	for name, tc := range cases {
		_, err := Exec(context.Background(), Config{Args: []string{"/bin/true"}, Binds: tc.binds}, Stdio{})
		if !errors.Is(err, errConfig) || !strings.Contains(fmt.Sprint(err), tc.says) {
			t.Errorf("%s: %v, want %v naming %q", name, err, errConfig, tc.says)
		}
	}
}

// TestBindsAndVantage: a bound file is readable and read-only in the
// container, and a listener opened through Vantage is in the checked
// namespace: the command reaches it on its loopback, the host's
// namespace does not have it.
func TestBindsAndVantage(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tool"), []byte("tool-bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	var l net.Listener
	got := make(chan string, 1)
	cfg := Config{
		Binds: []Bind{{Source: dir, Destination: "/opt/tools"}},
		Vantage: func(listen ListenFunc) (err error) {
			if l, err = listen("tcp", "127.0.0.1:7777"); err != nil {
				return err
			}
			go func() {
				c, err := l.Accept()
				if err != nil {
					got <- err.Error()
					return
				}
				b := make([]byte, 5)
				n, _ := c.Read(b)
				got <- string(b[:n])
				c.Close()
			}()
			return nil
		},
	}
	res, out, stderr := runIn(t, cfg, `cat /opt/tools/tool; echo
{ echo x > /opt/tools/tool; } 2>/dev/null && echo WRITABLE
bash -c 'exec 3<>/dev/tcp/127.0.0.1/7777 && printf hello >&3'`)
	defer l.Close()
	if res.ExitCode != 0 || !strings.HasPrefix(out, "tool-bytes\n") || strings.Contains(out, "WRITABLE") {
		t.Fatalf("exit %d, stdout %q, stderr %q", res.ExitCode, out, stderr)
	}
	if g := <-got; g != "hello" {
		t.Errorf("listener in the candidate's namespace got %q", g)
	}
	// The host's namespace has no such listener.
	if c, err := net.Dial("tcp", "127.0.0.1:7777"); err == nil {
		c.Close()
		t.Errorf("the Vantage listener is reachable from the host's namespace")
	}
}
