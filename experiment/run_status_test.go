package experiment

import "testing"

// AdmittedText is the one text of an admitted subject (`run status` and
// the run report show it): the optional parts only where the receipt has
// them, strings quoted.
func TestAdmittedText(t *testing.T) {
	t.Parallel()
	bin := "sha256:" + "bb"
	for name, c := range map[string]struct {
		a    ReceiptAdapter
		want string
	}{
		"reference": {ReceiptAdapter{Implementation: "javascript", Role: "reference", PackageDigest: "sha256:aa"},
			"javascript (reference) package sha256:aa"},
		"candidate": {ReceiptAdapter{Implementation: "candidate", Role: "candidate", PackageDigest: "sha256:aa", BinaryDigest: &bin,
			Environment: &Environment{Toolchain: "node 22", Model: `m "1"`, ToolVersion: "1"}},
			`candidate (candidate) package sha256:aa, binary sha256:bb, toolchain "node 22", model "m \"1\"", tool_version "1"`},
	} {
		if got := c.a.AdmittedText(); got != c.want {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
	e := TimelineEntry{Admitted: []ReceiptAdapter{{Implementation: "a", Role: "r", PackageDigest: "p"}, {Implementation: "b", Role: "s", PackageDigest: "q"}}}
	if got := e.AdmittedTexts(); len(got) != 2 || got[0] != "a (r) package p" || got[1] != "b (s) package q" {
		t.Errorf("AdmittedTexts %q", got)
	}
	if got := (TimelineEntry{}).AdmittedTexts(); got != nil {
		t.Errorf("AdmittedTexts of none %q, want nil", got)
	}
}
