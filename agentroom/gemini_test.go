package agentroom

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/sandbox"
)

// geminiDir holds the pinned Gemini CLI (package-lock.json; `npm ci` there,
// by .ci/run or by the test itself).
var geminiDir = filepath.Join("testdata", "gemini")

// geminiCLI returns the installed Gemini CLI's directory, installing it
// from the npm registry with `npm ci` if it is not there yet, or skips
// naming why.
func geminiCLI(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(geminiDir)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "node_modules", ".bin", "gemini")
	if _, err := os.Stat(bin); err != nil {
		npm, lerr := exec.LookPath("npm")
		if lerr != nil {
			t.Skipf("Gemini CLI not installed in %s and npm not found (%v): cannot install it from the registry", geminiDir, lerr)
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("npm ci in %s (the registry unreachable?): %v\n%s", geminiDir, err, out)
		}
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skipf("node not found: %v", err)
	}
	return dir
}

// standInCert makes a self-signed certificate for name (its own CA: the
// agent trusts it through NODE_EXTRA_CA_CERTS) and writes its PEM to dir.
func standInCert(t *testing.T, name, dir string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// geminiStandIn is the stand-in Gemini API: it scripts the agent, turn by
// turn (counted by the function responses the request carries), to list
// the package, read a file and write a source file through the room's
// tools as Gemini CLI declares them (mcp_<server>_<tool>), then to stop.
type geminiStandIn struct {
	mu       sync.Mutex
	requests []string // method path, in order
	declared [][]string
	results  []string // the function responses' texts the agent sent back
}

func (g *geminiStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	g.mu.Lock()
	g.requests = append(g.requests, r.Method+" "+r.URL.Path)
	g.mu.Unlock()
	var req struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				FunctionResponse *struct {
					Name     string         `json:"name"`
					Response map[string]any `json:"response"`
				} `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
	_ = json.Unmarshal(body, &req)
	var names []string
	for _, tl := range req.Tools {
		for _, d := range tl.FunctionDeclarations {
			names = append(names, d.Name)
		}
	}
	responses := 0
	var results []string
	for _, c := range req.Contents {
		for _, p := range c.Parts {
			if p.FunctionResponse != nil {
				responses++
				b, _ := json.Marshal(p.FunctionResponse.Response)
				results = append(results, string(b))
			}
		}
	}
	tool := func(suffix string) string {
		for _, n := range names {
			if strings.HasSuffix(n, "_"+suffix) {
				return n
			}
		}
		return "missing_" + suffix
	}
	var part map[string]any
	switch {
	case !strings.Contains(r.URL.Path, ":streamGenerateContent") && !strings.Contains(r.URL.Path, ":generateContent"):
		// countTokens and the like.
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"totalTokens":10}`)
		return
	case len(names) == 0:
		// A helper request without tools (routing, next-speaker check):
		// a JSON answer that hands the turn back to the user.
		part = map[string]any{"text": `{"reasoning":"scripted","model_choice":"pro","next_speaker":"user","complexity_reasoning":"scripted","complexity_score":10}`}
	case responses == 0:
		part = map[string]any{"functionCall": map[string]any{"name": tool("list_files"), "args": map[string]any{}}}
	case responses == 1:
		part = map[string]any{"functionCall": map[string]any{"name": tool("read_file"), "args": map[string]any{"path": "spec/SORTED.md"}}}
	case responses == 2:
		part = map[string]any{"functionCall": map[string]any{"name": tool("write_source"), "args": map[string]any{"path": "sorted/sorted.go", "content": "package sorted\n"}}}
	default:
		part = map[string]any{"text": "Done."}
	}
	if len(names) > 0 {
		g.mu.Lock()
		g.declared = append(g.declared, names)
		g.results = results
		g.mu.Unlock()
	}
	reply := map[string]any{
		"candidates":    []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{part}}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
		"modelVersion":  "stand-in",
	}
	b, _ := json.Marshal(reply)
	if strings.Contains(r.URL.Path, ":streamGenerateContent") {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// geminiSettings is the recipe of docs/guides/implementer.md §6 for Gemini CLI:
// the relay as the only MCP server, trusted (no confirmation in a
// non-interactive session), every built-in tool off, no update check, no
// usage statistics, no telemetry.
const geminiSettings = `{
  "mcpServers": {
    "cleanroom": {"command": "/opt/cleanroom/cleanroom", "args": ["room", "relay"], "trust": true, "timeout": 60000}
  },
  "tools": {"core": ["mcp_cleanroom_list_files", "mcp_cleanroom_read_file", "mcp_cleanroom_write_source"]},
  "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}},
  "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false, "checkpointing": {"enabled": false}},
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "ide": {"enabled": false}
}
`

// TestGeminiCLI runs the real Gemini CLI (from the npm registry, pinned in
// testdata/gemini) through room agent against the stand-in API on the
// host's loopback, allowlisted by name (model.cleanroom.test, mapped to
// 127.0.0.1 by Resolve: the tests' only use of a loopback target). The
// stand-in is reached over TLS through the proxy's tunnel (Gemini CLI
// refuses a base URL that is not https unless it is localhost). What the
// same sandbox refuses from the agent's vantage (host files, other hosts
// and ports, the sealed store, the host's loopback) is TestHostileAgent's.
func TestGeminiCLI(t *testing.T) {
	t.Parallel()
	needAgentRoom(t)
	dir := geminiCLI(t)
	const name = "model.cleanroom.test"
	caDir := t.TempDir()
	stand := &geminiStandIn{}
	srv := httptest.NewUnstartedServer(stand)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{standInCert(t, name, caDir)}}
	srv.StartTLS()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(geminiSettings), 0o644); err != nil {
		t.Fatal(err)
	}
	o, stdout, stderr := testOptions(t, "/opt/gemini/node_modules/.bin/gemini",
		"--allowed-mcp-server-names", "cleanroom", "-p", "Implement the package you can read through the cleanroom tools.")
	hp, err := ParseHostPort(name + ":" + port)
	if err != nil {
		t.Fatal(err)
	}
	o.Allow = []HostPort{hp}
	o.Resolve = map[string]netip.Addr{name: loopback}
	o.Binds = []sandbox.Bind{{Source: dir, Destination: "/opt/gemini"}, {Source: caDir, Destination: "/opt/testca"}}
	o.Home = home
	o.Env = []string{"GEMINI_API_KEY=stand-in-key", "GOOGLE_GEMINI_BASE_URL=https://" + name + ":" + port,
		"NODE_EXTRA_CA_CERTS=/opt/testca/ca.pem"}
	readableByCandidate(t, caDir)
	readableByCandidate(t, filepath.Join(home, ".gemini"))
	res := runSession(t, o)
	defer func() {
		if t.Failed() {
			stand.mu.Lock()
			t.Logf("requests %v\ndeclared %v\nresults %v", stand.requests, stand.declared, stand.results)
			stand.mu.Unlock()
			t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
		}
	}()
	if res.Sandbox.Status != sandbox.StatusExited || res.Sandbox.ExitCode != 0 {
		t.Errorf("gemini ended %s %d", res.Sandbox.Status, res.Sandbox.ExitCode)
	}
	// Node starts its MCP servers on socket pairs: the relay handed them
	// to the room and left the data path.
	if res.RelayMode != relayHanded {
		t.Errorf("relay mode %q, want %q", res.RelayMode, relayHanded)
	}
	if res.Version != "0.61.0" {
		t.Errorf("version %q, want the pinned 0.61.0", res.Version)
	}
	// What the agent wrote through the room is the workspace.
	if b, err := os.ReadFile(filepath.Join(o.Room.Workspace, "sorted", "sorted.go")); err != nil || string(b) != "package sorted\n" {
		t.Errorf("workspace sorted/sorted.go: %q, %v", b, err)
	}
	doc := readTranscript(t, o.Room.Transcript)
	var tools []string
	access, _ := doc.Get("access")
	for _, a := range access.([]any) {
		tool, _ := a.(*evidence.Object).Get("tool")
		outcome, _ := a.(*evidence.Object).Get("outcome")
		tools = append(tools, fmt.Sprint(tool, " ", outcome))
	}
	if want := []string{"list_files listed", "read_file served", "write_source written"}; !slices.Equal(tools, want) {
		t.Errorf("MCP calls %v, want %v", tools, want)
	}
	agent, _ := doc.Get("agent")
	line := agent.(*evidence.Object)
	if v, _ := line.Get("version"); v != "0.61.0" {
		t.Errorf("agent line version %v", v)
	}
	conns, _ := line.Get("connections")
	proxied := 0
	for _, c := range conns.([]any) {
		co := c.(*evidence.Object)
		h, _ := co.Get("host")
		oc, _ := co.Get("outcome")
		out, _ := co.Get("bytes_out")
		in, _ := co.Get("bytes_in")
		if oc == "proxied" {
			proxied++
			if h != name || out.(float64) == 0 || in.(float64) == 0 {
				t.Errorf("proxied connection %v: host %v, bytes out %v in %v", c, h, out, in)
			}
		}
	}
	if proxied == 0 {
		t.Errorf("no proxied connection recorded: %v", conns)
	}
	// The agent's own tools were off: the model was offered the room's
	// three and nothing else.
	stand.mu.Lock()
	defer stand.mu.Unlock()
	for _, d := range stand.declared {
		slices.Sort(d)
		if want := []string{"mcp_cleanroom_list_files", "mcp_cleanroom_read_file", "mcp_cleanroom_write_source"}; !slices.Equal(d, want) {
			t.Errorf("tools offered to the model %v, want %v", d, want)
			break
		}
	}
	if len(stand.results) < 2 || !strings.Contains(stand.results[1], "Sorted") {
		t.Errorf("the read_file result the agent sent back does not hold the package file: %v", stand.results)
	}
}
