package evidence_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

// TestJCSUpstreamVectors canonicalises the six upstream RFC 8785 inputs and
// compares the bytes with the published outhex octets.
func TestJCSUpstreamVectors(t *testing.T) {
	t.Parallel()
	dir := testshared.Path(t, "trvm", "world", "docs", "spec", "proof-wire", "vectors", "jcs-upstream")
	names := []string{"arrays", "french", "structures", "unicode", "values", "weird"}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join(dir, "input", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			hexText, err := os.ReadFile(filepath.Join(dir, "outhex", name+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := hex.DecodeString(strings.Join(strings.Fields(string(hexText)), ""))
			if err != nil {
				t.Fatalf("outhex: %v", err)
			}
			v, err := evidence.Read(in)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			got, err := evidence.Canonical(v)
			if err != nil {
				t.Fatalf("Canonical: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("canonical bytes differ\n got %s\nwant %s", got, want)
			}
		})
	}
}

// numgenStatic is the static edge-case table of the upstream ES6 number
// test generator (cyberphone/json-canonicalization testdata/numgen.js,
// Copyright 2006-2021 WebPKI.org, Apache License 2.0): IEEE 754 bit patterns.
var numgenStatic = []uint64{
	0x0000000000000000, 0x8000000000000000, 0x0000000000000001, 0x8000000000000001,
	0xc46696695dbd1cc3, 0xc43211ede4974a35, 0xc3fce97ca0f21056, 0xc3c7213080c1a6ac,
	0xc39280f39a348556, 0xc35d9b1f5d20d557, 0xc327af4c4a80aaac, 0xc2f2f2a36ecd5556,
	0xc2be51057e155558, 0xc28840d131aaaaac, 0xc253670dc1555557, 0xc21f0b4935555557,
	0xc1e8d5d42aaaaaac, 0xc1b3de4355555556, 0xc17fca0555555556, 0xc1496e6aaaaaaaab,
	0xc114585555555555, 0xc0e046aaaaaaaaab, 0xc0aa0aaaaaaaaaaa, 0xc074d55555555555,
	0xc040aaaaaaaaaaab, 0xc00aaaaaaaaaaaab, 0xbfd5555555555555, 0xbfa1111111111111,
	0xbf6b4e81b4e81b4f, 0xbf35d867c3ece2a5, 0xbf0179ec9cbd821e, 0xbecbf647612f3696,
	0xbe965e9f80f29212, 0xbe61e54c672874db, 0xbe2ca213d840baf8, 0xbdf6e80fe033c8c6,
	0xbdc2533fe68fd3d2, 0xbd8d51ffd74c861c, 0xbd5774ccac3d3817, 0xbd22c3d6f030f9ac,
	0xbcee0624b3818f79, 0xbcb804ea293472c7, 0xbc833721ba905bd3, 0xbc4ebe9c5db3c61e,
	0xbc18987d17c304e5, 0xbbe3ad30dfcf371d, 0xbbaf7b816618582f, 0xbb792f9ab81379bf,
	0xbb442615600f9499, 0xbb101e77800c76e1, 0xbad9ca58cce0be35, 0xbaa4a1e0a3e6fe90,
	0xba708180831f320d, 0xba3a68cd9e985016, 0x446696695dbd1cc3, 0x443211ede4974a35,
	0x43fce97ca0f21056, 0x43c7213080c1a6ac, 0x439280f39a348556, 0x435d9b1f5d20d557,
	0x4327af4c4a80aaac, 0x42f2f2a36ecd5556, 0x42be51057e155558, 0x428840d131aaaaac,
	0x4253670dc1555557, 0x421f0b4935555557, 0x41e8d5d42aaaaaac, 0x41b3de4355555556,
	0x417fca0555555556, 0x41496e6aaaaaaaab, 0x4114585555555555, 0x40e046aaaaaaaaab,
	0x40aa0aaaaaaaaaaa, 0x4074d55555555555, 0x4040aaaaaaaaaaab, 0x400aaaaaaaaaaaab,
	0x3fd5555555555555, 0x3fa1111111111111, 0x3f6b4e81b4e81b4f, 0x3f35d867c3ece2a5,
	0x3f0179ec9cbd821e, 0x3ecbf647612f3696, 0x3e965e9f80f29212, 0x3e61e54c672874db,
	0x3e2ca213d840baf8, 0x3df6e80fe033c8c6, 0x3dc2533fe68fd3d2, 0x3d8d51ffd74c861c,
	0x3d5774ccac3d3817, 0x3d22c3d6f030f9ac, 0x3cee0624b3818f79, 0x3cb804ea293472c7,
	0x3c833721ba905bd3, 0x3c4ebe9c5db3c61e, 0x3c18987d17c304e5, 0x3be3ad30dfcf371d,
	0x3baf7b816618582f, 0x3b792f9ab81379bf, 0x3b442615600f9499, 0x3b101e77800c76e1,
	0x3ad9ca58cce0be35, 0x3aa4a1e0a3e6fe90, 0x3a708180831f320d, 0x3a3a68cd9e985016,
	0x4024000000000000, 0x4014000000000000, 0x3fe0000000000000, 0x3fa999999999999a,
	0x3f747ae147ae147b, 0x3f40624dd2f1a9fc, 0x3f0a36e2eb1c432d, 0x3ed4f8b588e368f1,
	0x3ea0c6f7a0b5ed8d, 0x3e6ad7f29abcaf48, 0x3e35798ee2308c3a, 0x3ed539223589fa95,
	0x3ed4ff26cd5a7781, 0x3ed4f95a762283ff, 0x3ed4f8c60703520c, 0x3ed4f8b72f19cd0d,
	0x3ed4f8b5b31c0c8d, 0x3ed4f8b58d1c461a, 0x3ed4f8b5894f7f0e, 0x3ed4f8b588ee37f3,
	0x3ed4f8b588e47da4, 0x3ed4f8b588e3849c, 0x3ed4f8b588e36bb5, 0x3ed4f8b588e36937,
	0x3ed4f8b588e368f8, 0x3ed4f8b588e368f1, 0x3ff0000000000000, 0xbff0000000000000,
	0xbfeffffffffffffa, 0xbfeffffffffffffb, 0x3feffffffffffffa, 0x3feffffffffffffb,
	0x3feffffffffffffc, 0x3feffffffffffffe, 0xbfefffffffffffff, 0xbfefffffffffffff,
	0x3fefffffffffffff, 0x3fefffffffffffff, 0x3fd3333333333332, 0x3fd3333333333333,
	0x3fd3333333333334, 0x0010000000000000, 0x000ffffffffffffd, 0x000fffffffffffff,
	0x7fefffffffffffff, 0xffefffffffffffff, 0x4340000000000000, 0xc340000000000000,
	0x4430000000000000, 0x44b52d02c7e14af5, 0x44b52d02c7e14af6, 0x44b52d02c7e14af7,
	0x444b1ae4d6e2ef4e, 0x444b1ae4d6e2ef4f, 0x444b1ae4d6e2ef50, 0x3eb0c6f7a0b5ed8c,
	0x3eb0c6f7a0b5ed8d, 0x41b3de4355555553, 0x41b3de4355555554, 0x41b3de4355555555,
	0x41b3de4355555556, 0x41b3de4355555557, 0xbecbf647612f3696, 0x43143ff3c1cb0959,
}

// numgen regenerates the upstream ES6 number sequence: the static table,
// then 2000 serial values from the smallest normal up, then doubles taken
// four at a time (little-endian) from a SHA-256 chain that starts at 32 zero
// bytes, skipping zeros and non-finite values.
type numgen struct {
	idx   int
	block [32]byte
	data  []float64
}

func (g *numgen) next() float64 {
	defer func() { g.idx++ }()
	switch {
	case g.idx < len(numgenStatic):
		return math.Float64frombits(numgenStatic[g.idx])
	case g.idx < len(numgenStatic)+2000:
		return math.Float64frombits(0x0010000000000000 + uint64(g.idx-len(numgenStatic)))
	}
	for {
		if len(g.data) == 0 {
			g.block = sha256.Sum256(g.block[:])
			for i := range 4 {
				g.data = append(g.data, math.Float64frombits(binary.LittleEndian.Uint64(g.block[i*8:])))
			}
		}
		f := g.data[0]
		g.data = g.data[1:]
		if f != 0 && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f
		}
	}
}

// TestESNumberMillion writes the first 1,000,000 lines of the upstream
// "hex-ieee,expected" number file with AppendNumber and compares the SHA-256
// of the text with the published checksums (generated by node's
// Number.prototype.toString).
func TestESNumberMillion(t *testing.T) {
	t.Parallel()
	published := map[int]string{
		1000:    "be18b62b6f69cdab33a7e0dae0d9cfa869fda80ddc712221570f9f40a5878687",
		10000:   "b9f7a8e75ef22a835685a52ccba7f7d6bdc99e34b010992cbc5864cd12be6892",
		100000:  "22776e6d4b49fa294a0d0f349268e5c28808fe7e0cb2bcbe28f63894e494d4c7",
		1000000: "49415fee2c56c77864931bd3624faad425c3c577d6d74e89a83bc725506dad16",
	}
	g := &numgen{}
	h := sha256.New()
	w := bufio.NewWriterSize(h, 1<<16)
	var line []byte
	for i := 1; i <= 1000000; i++ {
		f := g.next()
		line = strconv.AppendUint(line[:0], math.Float64bits(f), 16)
		line = append(line, ',')
		line = evidence.AppendNumber(line, f)
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			t.Fatal(err)
		}
		if want, ok := published[i]; ok {
			w.Flush()
			if got := hex.EncodeToString(h.Sum(nil)); got != want {
				t.Fatalf("after %d lines: sha256 %s, published %s", i, got, want)
			}
		}
	}
}

func TestCanonicalSpotValues(t *testing.T) {
	t.Parallel()
	// Expected texts written from ECMA-262 Number::toString and RFC 8785.
	tests := []struct {
		in   any
		want string
	}{
		{0.0, "0"},
		{math.Copysign(0, -1), "0"}, // negative zero (the literal -0.0 is +0 in Go)
		{1e21, "1e+21"},
		{1e20, "100000000000000000000"},
		{1e-7, "1e-7"},
		{1e-6, "0.000001"},
		{123e-20, "1.23e-18"},
		{sum(0.1, 0.2), "0.30000000000000004"}, // not a constant expression
		{5e-324, "5e-324"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{9007199254740993.0, "9007199254740992"},
		{float32(0.5), "0.5"},
		{int64(1 << 53), "9007199254740992"},
		{"\u2028\u007f/\x1f\"\\", "\"\u2028\u007f/\\u001f\\\"\\\\\""},
		{"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{map[string]any{"\U0001F602": 1, "\uFB33": 2, "a": nil}, "{\"a\":null,\"\U0001F602\":1,\"\uFB33\":2}"},
		{[]string{"b", "a"}, `["b","a"]`},
		{struct {
			B int    `json:"b"`
			A string `json:"a"`
		}{1, "x"}, `{"a":"x","b":1}`},
	}
	for _, tt := range tests {
		got, err := evidence.Canonical(tt.in)
		if err != nil {
			t.Errorf("Canonical(%#v): %v", tt.in, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("Canonical(%#v) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestCanonicalRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   any
		want evidence.Class
	}{
		{"NaN", math.NaN(), evidence.ClassNonFinite},
		{"+Inf", []any{math.Inf(1)}, evidence.ClassNonFinite},
		{"-Inf member", map[string]any{"a": math.Inf(-1)}, evidence.ClassNonFinite},
		{"lone surrogate (Go form)", "\xed\xa0\x80", evidence.ClassInvalidForWrite},
		{"invalid UTF-8 name", map[string]any{"\xff": 1}, evidence.ClassInvalidForWrite},
		{"duplicate member", &evidence.Object{Members: []evidence.Member{{Name: "a", Value: 1.0}, {Name: "a", Value: 2.0}}}, evidence.ClassDuplicateName},
		{"int beyond 2^53", int64(1<<53 + 1), evidence.ClassNotJSONValue},
		{"uint beyond 2^53", uint64(1<<53 + 1), evidence.ClassNotJSONValue},
		{"channel", make(chan int), evidence.ClassNotJSONValue},
		{"function", func() {}, evidence.ClassNotJSONValue},
		{"int-keyed map", map[int]string{1: "a"}, evidence.ClassNotJSONValue},
		// encoding/json replaces invalid UTF-8 with U+FFFD: a struct must
		// not be a way around the refusal above.
		{"invalid UTF-8 in a struct field", struct{ A string }{"x\xff"}, evidence.ClassInvalidForWrite},
		{"lone surrogate in a struct's nested map key", struct{ M []map[string]int }{[]map[string]int{{"\xed\xa0\x80": 1}}}, evidence.ClassInvalidForWrite},
		{"invalid UTF-8 behind a struct pointer field", struct{ P *struct{ S any } }{&struct{ S any }{"\xc0\xaf"}}, evidence.ClassInvalidForWrite},
		// encoding/json also writes the fields an embedded struct of an
		// unexported type promotes, and a TextMarshaler's text as a string
		// or a map key: each with U+FFFD for invalid UTF-8.
		{"invalid UTF-8 promoted from an embedded unexported struct", outerWithEmbedded{embedded{"\xff"}}, evidence.ClassInvalidForWrite},
		{"invalid UTF-8 in a TextMarshaler field", struct{ T textValue }{textValue{"\xff"}}, evidence.ClassInvalidForWrite},
		{"invalid UTF-8 in a pointer-method TextMarshaler behind a pointer", struct{ P *ptrText }{&ptrText{"\xff"}}, evidence.ClassInvalidForWrite},
		{"invalid UTF-8 in a TextMarshaler map key", struct{ M map[textValue]int }{map[textValue]int{{"\xff"}: 1}}, evidence.ClassInvalidForWrite},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := evidence.Canonical(tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Canonical = %q, %v; want class %s", out, err, tt.want)
			}
			if out != nil {
				t.Errorf("partial output %q returned with the error", out)
			}
		})
	}
}

func TestCanonicalCycleRefused(t *testing.T) {
	t.Parallel()
	a := []any{nil}
	a[0] = a
	if _, err := evidence.Canonical(a); !errors.Is(err, evidence.ClassNotJSONValue) {
		t.Fatalf("cycle: %v", err)
	}
}

func TestStringify(t *testing.T) {
	t.Parallel()
	// Expected bytes are what node's JSON.stringify(v, null, indent) + "\n"
	// writes for the same value (member order as in the document).
	v, err := evidence.Read([]byte(`{"z":[1,{"b":-0,"a":[]}],"a":{},"s":"é\u0001"}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := evidence.Stringify(v, " ")
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n \"z\": [\n  1,\n  {\n   \"b\": 0,\n   \"a\": []\n  }\n ],\n \"a\": {},\n \"s\": \"é\\u0001\"\n}\n"
	if string(got) != want {
		t.Errorf("Stringify:\n%s\nwant:\n%s", got, want)
	}
	compact, err := evidence.Stringify(v, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"z":[1,{"b":0,"a":[]}],"a":{},"s":"é\u0001"}`; string(compact) != want {
		t.Errorf("Stringify compact = %s, want %s", compact, want)
	}
}

func TestCompareUTF16(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int // sign
	}{
		{"", "", 0},
		{"a", "b", -1},
		{"a", "aa", -1},
		{"\U0001F602", "\uFB33", -1}, // D83D < FB33
		{"\uFFFF", "\U00010000", 1},  // FFFF > D800
		{"\U0001F600", "\U0001F601", -1},
		{"e\u0301", "é", -1},
	}
	for _, tt := range tests {
		got := evidence.CompareUTF16(tt.a, tt.b)
		if (got < 0) != (tt.want < 0) || (got > 0) != (tt.want > 0) {
			t.Errorf("CompareUTF16(%q, %q) = %d, want sign %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func sum(a, b float64) float64 { return a + b }

type embedded struct{ S string }

type outerWithEmbedded struct{ embedded }

// textValue marshals as its own text, whatever bytes it holds.
type textValue struct{ s string }

func (v textValue) MarshalText() ([]byte, error) { return []byte(v.s), nil }

// ptrText marshals as its text through a pointer method.
type ptrText struct{ s string }

func (v *ptrText) MarshalText() ([]byte, error) { return []byte(v.s), nil }
