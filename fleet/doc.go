// Package fleet renders many runs for an existing orchestrator and brings
// their evidence home: `fleet plan` turns a run list (blind runs pinned to a
// release srel and package bpkg, or AMBER runs pinned to a case manifest
// sha256, each with a candidate, an image, a command, a runtime class, an
// allowlist and limits) into Kubernetes manifests built from the k8s.io/api
// types — one batch/v1 Job and one networking/v1 NetworkPolicy per run — and
// `fleet collect` copies what the Jobs left behind into the local results
// layout and verifies each run with the same verifiers as `run verify` and
// `amber record verify`.
//
// It owns the run list's shape (read through the strict evidence reader,
// closed, every rule a sentinel), the rendering (Job, NetworkPolicy), the
// plan directory (written whole or not at all) and the collection report.
// It does not schedule, talk to a cluster, or build images: the operator
// applies the manifests with the cluster's own tools.
//
// It refuses: a run list that is not an array of closed run objects; a
// name that is not a DNS-1123 label or that repeats; an identity that is
// not 64 lowercase hex; an image not pinned by digest; a runtime class
// other than runc or gvisor; an allowlist entry that is not IP:PORT of a
// unicast address; a run without cpu, memory, ephemeral-storage and
// deadline limits. Collect refuses a result that is a symbolic link or
// holds one (or a hard link), a destination that already exists, a record pinned to
// another identity than the planned run, and a result that does not name its
// plan entry (errPlanEntry): each Job carries its run name, run digest and
// plan digest in its environment, `cleanroom fleet bind` (Bind) writes them
// beside the final record with the record's digest, and collect requires
// them back, so two runs pinned alike but with another image or command
// cannot trade results. The plan keeps the manifests in k8s/ and the run
// list beside it, so `kubectl apply -f plan/k8s/` applies only manifests.
//
// # Security considerations
//
// The manifests state the isolation; the cluster enforces it. What a
// manifest cannot guarantee: that the named RuntimeClass exists and is the
// runtime it claims, that the cluster's network plugin enforces
// NetworkPolicy at all (a plugin without policy support accepts the object
// and ignores it), or that the policy is in force before the pod's first
// packet. The run's container is the sandbox there: the cleanroom mechanism
// check (`sandbox check`, the hooks of `sandbox bundle`) does not run inside
// a pod, so a collected record is trusted for what its own verifier checks
// (receipts, digests, signatures, pinned identities), not for how the
// cluster isolated it. Collect copies with a descriptor walk that refuses
// symbolic links, hard links and special files (a result tree cannot point
// the copy at a host file), streams each file (never whole in memory),
// re-hashes every copied file against the digest taken while
// walking (a swap between walk and copy is caught), and publishes each
// run's directory with an atomic rename that never replaces an existing one.
//
// # No API promise
//
// This package is cleanroom's own machinery, not an API: it is exported for
// the cleanroom binaries and their tests, and any identifier in it may
// change in any commit, without notice. docs/design.md lists the packages
// meant to be imported.
package fleet
