package fleet

import (
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Annotation and label keys written on every Job and its pods.
const (
	AnnotationKind         = "cleanroom.dev/kind"
	AnnotationSrel         = "cleanroom.dev/srel"
	AnnotationBpkg         = "cleanroom.dev/bpkg"
	AnnotationCaseManifest = "cleanroom.dev/case-manifest-sha256"
	AnnotationCandidate    = "cleanroom.dev/candidate"
	AnnotationRunDigest    = "cleanroom.dev/run-sha256"
	AnnotationPlanDigest   = "cleanroom.dev/plan-sha256"
	AnnotationAllow        = "cleanroom.dev/allow"
	LabelRun               = "cleanroom.dev/run"
	LabelManagedBy         = "app.kubernetes.io/managed-by"
)

// Environment of the run's container: the run's plan entry, read by
// `cleanroom fleet bind` (with CLEANROOM_RUN and CLEANROOM_RESULTS).
const (
	EnvRun        = "CLEANROOM_RUN"
	EnvResults    = "CLEANROOM_RESULTS"
	EnvKind       = "CLEANROOM_KIND"
	EnvRunDigest  = "CLEANROOM_RUN_SHA256"
	EnvPlanDigest = "CLEANROOM_PLAN_SHA256"
)

// Paths inside the run's container.
const (
	ResultsPath   = "/results"   // where the command leaves its records (a world, or run.json + .sig)
	WorkspacePath = "/workspace" // the candidate's scratch space
	TmpPath       = "/tmp"
	// UID is the unprivileged identity the run's container runs as
	// (nobody), the same the clean room uses.
	UID = 65534
)

// Job renders the run as a batch/v1 Job: one pod, never retried, on the
// run's runtime class, with the hardening every field below names.
func Job(r Run) *batchv1.Job {
	labels := map[string]string{LabelRun: r.Name, LabelManagedBy: "cleanroom"}
	ann := Annotations(r)
	results := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr(r.Limits.EphemeralStorage)}}
	subPath := ""
	if r.ResultsClaim != "" {
		results = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: r.ResultsClaim}}
		subPath = r.Name // one claim can hold every run's results, each in its own directory
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:              r.Limits.CPU,
		corev1.ResourceMemory:           r.Limits.Memory,
		corev1.ResourceEphemeralStorage: r.Limits.EphemeralStorage,
	}
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: r.Name, Labels: labels, Annotations: ann},
		Spec: batchv1.JobSpec{
			// A blind run happens once: a retry would be a second attempt
			// at the same sealed material, so the Job never retries.
			BackoffLimit:          ptr(int32(0)),
			Completions:           ptr(int32(1)),
			Parallelism:           ptr(int32(1)),
			ActiveDeadlineSeconds: ptr(r.Limits.DeadlineSeconds),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: ann},
				Spec: corev1.PodSpec{
					RestartPolicy:    corev1.RestartPolicyNever,
					RuntimeClassName: ptr(r.RuntimeClass),
					// The pod's own network namespace, PID and IPC
					// namespaces: never the node's.
					HostNetwork: false,
					HostPID:     false,
					HostIPC:     false,
					// No credential to the cluster's API inside the run,
					// and no service addresses injected into its
					// environment.
					AutomountServiceAccountToken: ptr(false),
					EnableServiceLinks:           ptr(false),
					// The candidate has nothing to share with another
					// container of the pod.
					ShareProcessNamespace: ptr(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr(true),
						RunAsUser:      ptr(int64(UID)),
						RunAsGroup:     ptr(int64(UID)),
						FSGroup:        ptr(int64(UID)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:            "run",
						Image:           r.Image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         r.Command,
						Env: []corev1.EnvVar{
							{Name: EnvRun, Value: r.Name},
							{Name: EnvResults, Value: ResultsPath},
							// The plan entry `cleanroom fleet bind` writes
							// beside the record, and collect requires back.
							{Name: EnvKind, Value: r.Kind},
							{Name: EnvRunDigest, Value: r.Digest},
							{Name: EnvPlanDigest, Value: r.PlanSHA256},
						},
						WorkingDir: WorkspacePath,
						Resources:  corev1.ResourceRequirements{Limits: res, Requests: res},
						SecurityContext: &corev1.SecurityContext{
							Privileged:               ptr(false),
							AllowPrivilegeEscalation: ptr(false), // no_new_privs: no setuid gain
							ReadOnlyRootFilesystem:   ptr(true),  // the image is read-only; only the volumes below are writable
							RunAsNonRoot:             ptr(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
							ProcMount:                ptr(corev1.DefaultProcMount), // /proc masked as the runtime masks it
						},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "workspace", MountPath: WorkspacePath},
							{Name: "tmp", MountPath: TmpPath},
							{Name: "results", MountPath: ResultsPath, SubPath: subPath},
						},
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					}},
					Volumes: []corev1.Volume{
						{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr(r.Limits.EphemeralStorage)}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("64Mi"))}}},
						{Name: "results", VolumeSource: results},
					},
				},
			},
		},
	}
}

// NetworkPolicy renders the run's network: no ingress at all, and egress
// only to the allowlist, one rule per entry (the address as a /32 or /128
// ipBlock and its TCP port). An empty allowlist denies all egress, DNS
// included: the allowlist names addresses, so nothing needs resolving.
func NetworkPolicy(r Run) *networkingv1.NetworkPolicy {
	egress := []networkingv1.NetworkPolicyEgressRule{}
	for _, ep := range r.Allow {
		bits := 32
		if ep.Addr.Is6() {
			bits = 128
		}
		egress = append(egress, networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: fmt.Sprintf("%s/%d", ep.Addr, bits)}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr(corev1.ProtocolTCP), Port: ptr(intstr.FromInt32(int32(ep.Port)))}},
		})
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        r.Name,
			Labels:      map[string]string{LabelRun: r.Name, LabelManagedBy: "cleanroom"},
			Annotations: Annotations(r),
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelRun: r.Name}},
			// Both types listed with no ingress rule: nothing may connect
			// to the run, and it may connect only where egress says.
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{},
			Egress:      egress,
		},
	}
}

// Annotations are the run's pinned identities as written on its objects.
func Annotations(r Run) map[string]string {
	a := map[string]string{
		AnnotationKind:       r.Kind,
		AnnotationCandidate:  r.Candidate,
		AnnotationRunDigest:  r.Digest,
		AnnotationPlanDigest: r.PlanSHA256,
	}
	switch r.Kind {
	case KindBlind:
		a[AnnotationSrel], a[AnnotationBpkg] = r.Srel, r.Bpkg
	case KindAmber:
		a[AnnotationCaseManifest] = r.CaseManifestSHA256
	}
	allow := make([]string, len(r.Allow))
	for i, ep := range r.Allow {
		allow[i] = ep.String()
	}
	a[AnnotationAllow] = strings.Join(allow, ",")
	return a
}

func ptr[T any](v T) *T { return &v }
