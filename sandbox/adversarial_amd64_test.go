package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tinyELF is a static x86_64 executable of one loadable segment (at
// 0x400000, read and execute) whose entry point is code, at 0x400000+120
// (data a program carries follows its code there).
func tinyELF(code []byte) []byte {
	const base, hdr = 0x400000, 64 + 56
	b := make([]byte, hdr, hdr+len(code))
	copy(b, []byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0})
	le := binary.LittleEndian
	le.PutUint16(b[16:], 2)    // ET_EXEC
	le.PutUint16(b[18:], 0x3e) // EM_X86_64
	le.PutUint32(b[20:], 1)
	le.PutUint64(b[24:], base+hdr) // entry
	le.PutUint64(b[32:], 64)       // program headers
	le.PutUint16(b[52:], 64)
	le.PutUint16(b[54:], 56)
	le.PutUint16(b[56:], 1)
	ph := b[64:]
	le.PutUint32(ph[0:], 1) // PT_LOAD
	le.PutUint32(ph[4:], 5) // R+X
	le.PutUint64(ph[16:], base)
	le.PutUint64(ph[24:], base)
	le.PutUint64(ph[32:], uint64(hdr+len(code)))
	le.PutUint64(ph[40:], uint64(hdr+len(code)))
	le.PutUint64(ph[48:], 0x1000)
	return append(b, code...)
}

// Machine code pieces.
var (
	exit0 = []byte{0x31, 0xff, 0xb8, 0x3c, 0, 0, 0, 0x0f, 0x05} // xor edi,edi; mov eax,60; syscall
	exit7 = []byte{0xbf, 7, 0, 0, 0, 0xb8, 0x3c, 0, 0, 0, 0x0f, 0x05}
)

func movEAX(v uint32) []byte {
	return append([]byte{0xb8}, binary.LittleEndian.AppendUint32(nil, v)...)
}
func movEBX(v uint32) []byte {
	return append([]byte{0xbb}, binary.LittleEndian.AppendUint32(nil, v)...)
}
func movECX(v uint32) []byte {
	return append([]byte{0xb9}, binary.LittleEndian.AppendUint32(nil, v)...)
}
func movEDI(v uint32) []byte {
	return append([]byte{0xbf}, binary.LittleEndian.AppendUint32(nil, v)...)
}
func movESI(v uint32) []byte {
	return append([]byte{0xbe}, binary.LittleEndian.AppendUint32(nil, v)...)
}

var (
	int80   = []byte{0xcd, 0x80}
	sysInsn = []byte{0x0f, 0x05}
	xorEDX  = []byte{0x31, 0xd2}
)

func join(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// socketcallVsock is i386 socketcall(SYS_SOCKET, {AF_VSOCK, SOCK_STREAM,
// 0}) through int 0x80: the argument block sits after the code.
func socketcallVsock() []byte {
	const base = 0x400000 + 64 + 56
	// mov ebx,1; mov ecx,ARGS; mov eax,102; int 0x80; exit(0); ARGS
	codeLen := 5 + 5 + 5 + 2 + len(exit0)
	args := binary.LittleEndian.AppendUint32(nil, 40)
	args = binary.LittleEndian.AppendUint32(args, 1)
	args = binary.LittleEndian.AppendUint32(args, 0)
	return join(movEBX(1), movECX(uint32(base+codeLen)), movEAX(102), int80, exit0, args)
}

// The filter judges only the native ABI and kills a process entering the
// kernel through another: the i386 entry (int 0x80, whose numbers differ:
// 20 is getpid there, 102 socketcall, which multiplexes every socket call
// past the family check) and x32 (x86_64's arch value with bit 30 set in
// the number). Each program, run on the host, makes its call and exits
// 0 (the entry exists on this kernel); in the sandbox it dies by SIGSYS.
func TestForeignABIsKilled(t *testing.T) {
	needSandbox(t)
	ws := t.TempDir()
	progs := map[string][]byte{
		"native_exit7":    exit7, // the control: the ELF runs
		"i386_getpid":     join(movEAX(20), int80, exit0),
		"i386_socketcall": socketcallVsock(),
		"x32_getpid":      join(movEAX(0x40000000|39), sysInsn, exit0),
		"x32_socket":      join(movEDI(40), movESI(1), xorEDX, movEAX(0x40000000|41), sysInsn, exit0),
	}
	var script []string
	for name, code := range progs {
		p := filepath.Join(ws, name)
		if err := os.WriteFile(p, tinyELF(code), 0o755); err != nil {
			t.Fatal(err)
		}
		script = append(script, fmt.Sprintf("/workspace/%s; echo %s=$?", name, name))
	}
	// On the host: each exits as written (the control 7, the others 0).
	// A kernel without IA-32 emulation faults at int 0x80 before any
	// system-call entry (SIGSEGV): those programs test nothing there.
	hostWant := map[string]int{"native_exit7": 7}
	const sigsys = "159" // 128 + SIGSYS: the filter's SECCOMP_RET_KILL_PROCESS
	want := map[string]string{"native_exit7": "7", "i386_getpid": sigsys, "i386_socketcall": sigsys, "x32_getpid": sigsys, "x32_socket": sigsys}
	for name := range progs {
		err := exec.Command(filepath.Join(ws, name)).Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s on the host: %v", name, err)
		}
		if code != hostWant[name] {
			if strings.HasPrefix(name, "i386") && code == -1 && strings.Contains(err.Error(), "segmentation fault") {
				t.Logf("%s on the host: %v: no IA-32 entry on this kernel, not judged", name, err)
				delete(want, name)
				continue
			}
			t.Fatalf("%s on the host: exit %d (%v), want %d: the program proves nothing", name, code, err, hostWant[name])
		}
	}
	res, out, stderr := runIn(t, Config{Workspace: ws}, strings.Join(script, "\n"))
	if res.Status != StatusExited {
		t.Fatalf("status %s, stderr %s", res.Status, stderr)
	}
	got := keyValues(out)
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: exit %q, want %s", name, got[name], w)
		}
	}
}
