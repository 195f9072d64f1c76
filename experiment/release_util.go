package experiment

import (
	"slices"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

func slicesSortUTF16(s []string) { slices.SortFunc(s, evidence.CompareUTF16) }
