// Package docs holds the guides; its test runs them. Every fenced block
// whose info string is "sh run" is executed, in order, as one bash script
// per guide, in a fresh empty directory, with the cleanroom binary built
// from this tree first on PATH and CLEANROOM_SRC naming the repository
// (where the synthetic world lives). A block may say what it needs —
// "```sh run needs=namespaces,node" — and when this machine cannot provide
// it, the blocks before it still run and must pass, and the rest of the
// guide is skipped with the reason. So a guide cannot rot: a command that
// changes, a flag that disappears or an output a step relies on fails here.
//
// The test refuses a guide with an unclosed runnable block (it would
// swallow the rest), an unknown block attribute, or a need it cannot probe
// (a misspelt need would skip the rest of the guide for good). It owns the
// guides and the exit-code and CLI references beside them; what a command
// does is its package's.
package docs
