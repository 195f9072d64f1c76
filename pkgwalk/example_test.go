package pkgwalk_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// Measure a package, emit it into an empty directory from its manifest
// (refused unless it is the pinned bpkg), and verify the view.
func Example() {
	tree, err := pkgwalk.Walk("testdata/synthetic", pkgwalk.WalkOptions{})
	if err != nil {
		panic(err)
	}
	if err := tree.Err(); err != nil {
		fmt.Println("refused:", err) // every problem, each with its path and rule
		return
	}
	m, _ := pkgwalk.NewManifest(tree, pkgwalk.DefaultRootLabel)
	id, _ := m.ID()
	fmt.Println(id, m.FileCount)

	work, _ := os.MkdirTemp("", "pkgwalk-example-")
	defer os.RemoveAll(work)
	mount := filepath.Join(work, "mount")
	if _, err := pkgwalk.Emit(context.Background(), "testdata/synthetic", mount, id, pkgwalk.EmitOptions{}); err != nil {
		panic(err)
	}
	view, err := pkgwalk.VerifyView(mount, m)
	if err != nil {
		panic(err)
	}
	spec, _ := view.File("SPEC.md")
	fmt.Println(len(view.Files), spec.SHA256 == m.Files[0].SHA256)
	// Output:
	// bpkg-b37a3a1f55a4026bc5a39a7254dd8b87e133d0c5337d9fd996b54dc96924d060 7
	// 7 true
}
