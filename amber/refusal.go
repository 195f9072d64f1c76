package amber

import (
	"errors"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/sign"
)

// refusals are the rules whose breach means "the input broke a rule" (exit
// 1), as opposed to an environment or argument that cannot do the work. An
// output that already exists (ErrOutputExists, ErrIndexExists) is not one:
// like every command's existing output it is unusable (exit 2); nor is
// ErrBuildArgument, a flag or argument value that cannot be used (a date
// that is not a date, an origin with a space): unusable arguments (exit 2).
var refusals = []error{
	ErrShallowSource, ErrPartialSource, ErrSubmodule, ErrLFS, ErrPinBytes, ErrCutoffRef,
	ErrNotCommit, ErrAllowlistFormat, ErrMismatch, ErrCutoffBeforeCommit,
	ErrManifestField, ErrYAMLSyntax, ErrYAMLTooLarge, ErrYAMLMultiDoc, ErrYAMLDuplicateKey,
	ErrYAMLAlias, ErrYAMLTag, ErrYAMLKey, ErrYAMLNotMapping, ErrYAMLUnknownField,
	ErrPackFileType, ErrPackName, ErrPackTooLarge, ErrPackChanged, ErrPackEntry,
	ErrBundleSignature, ErrBundleCapability, ErrBundlePrerequisite, ErrBundleRefs, ErrBundleHeader, ErrBundleUnreachable,
	ErrNotRegular, ErrTooLarge,
	ErrEntryForm, ErrHistory, ErrCheckpoint, ErrNotIndexed, ErrRetired,
	ErrRewritten, ErrProofForm, ErrIndexKey, ErrDuplicateCase, ErrIndexBusy,
	sign.ErrMalformed, sign.ErrTooLarge, sign.ErrNamespace, sign.ErrHashAlgorithm,
	sign.ErrWrongKey, sign.ErrBadSignature,
}

// IsRefusal reports whether err is a refusal of the input (a broken rule or
// a failed check) rather than a problem of the environment.
func IsRefusal(err error) bool {
	var ce *CheckError
	if errors.As(err, &ce) {
		return true
	}
	for _, r := range refusals {
		if errors.Is(err, r) {
			return true
		}
	}
	return evidence.IsRefusal(err)
}
