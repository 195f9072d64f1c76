package main

import "github.com/spf13/cobra"

// command is one entry of the command table: the constructor of a command
// and the entries of the commands under it. A constructor makes its own
// command only (its help, flags and RunE); where it sits in the tree is
// said here and nowhere else.
type command struct {
	ctor func() *cobra.Command
	sub  []command
}

// leaves are commands with nothing under them.
func leaves(makers ...func() *cobra.Command) []command {
	cs := make([]command, len(makers))
	for i, m := range makers {
		cs[i] = command{ctor: m}
	}
	return cs
}

// commandTable is every command of cleanroom under the root, in one place
// (completion and help are cobra's own, added by newRootCmd). `cleanroom
// man`, the completion scripts and --help all read the tree built from it.
// TestCommandTree holds the tree it builds.
var commandTable = []command{
	{newWorldCmd, leaves(newWorldInitCmd)},
	{newReleaseCmd, leaves(newReleaseVerifyCmd, newReleaseIDCmd, newReleaseIssueCmd, newReleaseDiffCmd)},
	{newPackageCmd, leaves(newPackageManifestCmd, newPackageIDCmd, newPackageEmitCmd, newPackageVerifyCmd)},
	{newRoomCmd, leaves(newRoomServeCmd, newRoomDriveCmd, newRoomTranscriptCmd, newRoomAgentCmd, newRoomRelayCmd, newRoomSessionsCmd)},
	{newRunCmd, append(leaves(newRunPinCmd, newRunFreezeCmd, newRunRevealCmd, newRunAbortCmd,
		newRunVerifyCmd, newRunStatusCmd, newRunIDCmd, newRunListCmd,
		newRunMeasureCmd, newRunCompleteCmd, newRunReportCmd),
		command{newRunFindingCmd, leaves(newRunFindingListCmd, newRunFindingClassifyCmd)},
		command{newRunQuestionCmd, leaves(newRunQuestionAddCmd, newRunQuestionListCmd)},
	)},
	{newHoldoutCmd, leaves(newHoldoutScoreCmd, newHoldoutFixtureCmd, newHoldoutInteropCmd, newHoldoutCheckCmd, newHoldoutCommitmentCmd)},
	{newSandboxCmd, leaves(newSandboxCheckCmd, newSandboxExecCmd, newSandboxProbeCmd, newSandboxBundleCmd, newSandboxGCCmd,
		newSandboxScrubCmd, newSandboxHookCmd, newSandboxSealHookCmd)},
	{newAmberCmd, []command{
		{newAmberKeyCmd, leaves(newAmberKeyGenCmd)},
		{newAmberCaseCmd, leaves(newAmberCaseBuildCmd, newAmberCaseVerifyCmd)},
		{newAmberIndexCmd, leaves(newAmberIndexInitCmd, newAmberIndexAppendCmd, newAmberIndexRetireCmd,
			newAmberIndexVerifyCmd, newAmberIndexProveCmd, newAmberIndexVerifyProofCmd, newAmberIndexShowCmd)},
		{ctor: newAmberRunCmd},
		{newAmberRecordCmd, leaves(newAmberRecordVerifyCmd)},
		{ctor: newAmberSummaryCmd},
		{ctor: newAmberCompareCmd},
		{ctor: newAmberAdjudicateCmd},
	}},
	{newEvidenceCmd, leaves(newEvidenceCheckCmd, newEvidenceCanonCmd, newEvidenceSelftestCmd)},
	{newFleetCmd, leaves(newFleetPlanCmd, newFleetBindCmd, newFleetCollectCmd)},
	{ctor: newDemoCmd},
	{ctor: newVersionCmd},
	{ctor: newManCmd},
}

// addCommands makes the commands of table, each with every command under
// it, and adds them to parent: the one place a command joins the tree.
func addCommands(parent *cobra.Command, table []command) {
	for _, e := range table {
		c := e.ctor()
		addCommands(c, e.sub)
		parent.AddCommand(c)
	}
}
