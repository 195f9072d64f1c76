package sandbox

import (
	"path/filepath"
	"slices"
)

// ScrubRecordName is the file, in the bundle directory, where the bundle's
// poststop hook (`<this binary> sandbox scrub --record FILE WORKSPACE`)
// writes what it found in the workspace.
const ScrubRecordName = "workspace_scrub.json"

// ScrubReport is what `cleanroom sandbox scrub` prints and the bundle's
// poststop hook records.
type ScrubReport struct {
	Workspace string             `json:"workspace"`
	Findings  []WorkspaceFinding `json:"workspace_findings"`
	// Refused is true when a finding forbids reading the workspace as one
	// holding only files and directories (WorkspaceRefused).
	Refused bool `json:"refused"`
}

// WorkspaceRefused reports whether the findings of a post-run scrub forbid
// reading the workspace: a FIFO, socket or device (RuleSpecialFile), or a
// walk that could not finish (RuleUnwalked). Stripped set-id bits do not.
func WorkspaceRefused(found []WorkspaceFinding) bool {
	return slices.ContainsFunc(found, func(f WorkspaceFinding) bool {
		return f.Rule == RuleSpecialFile || f.Rule == RuleUnwalked
	})
}

// ScrubWorkspace gives a workspace that another runtime ran a candidate in
// (an OCI bundle of WriteBundle under runc, crun or runsc) the treatment
// Exec gives its own after the run: set-user-ID and set-group-ID bits
// stripped, FIFOs, sockets and devices named. It must run once every
// process of the candidate is gone (the bundle's poststop hook, or the
// operator after the runtime has exited), and before anything reads the
// workspace. The directory is held to the path rules of a workspace
// (CheckHostDir): a scrub of a system tree would strip the set-id bits the
// host relies on. The error is the walk's when it could not finish (the
// report then holds RuleUnwalked).
func ScrubWorkspace(dir, stateDir string) (*ScrubReport, error) {
	real, err := CheckHostDir("workspace", filepath.Clean(dir), stateDir)
	if err != nil {
		return nil, err
	}
	found, err := scrubWorkspace(real, nil)
	return &ScrubReport{Workspace: real, Findings: found, Refused: WorkspaceRefused(found)}, err
}

// WriteScrubRecord writes rep to path, which must not exist (the bundle's
// poststop hook record).
func WriteScrubRecord(path string, rep *ScrubReport) error { return writeRecordExclusive(path, rep) }
