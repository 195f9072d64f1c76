package fleet

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi/openapitest"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"
)

const (
	hexA  = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	hexB  = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	hexC  = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
	image = "registry.example/cleanroom@sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
)

// runList is the test's run list: a blind run on gVisor with two
// allowlisted endpoints (one IPv6) and a results claim, and an AMBER run
// on runc with no egress at all.
var runList = `[
 {"name": "blind-model-a", "kind": "blind", "srel": "srel-` + hexA + `", "bpkg": "bpkg-` + hexB + `",
  "candidate": "candidate", "image": "` + image + `", "command": ["cleanroom", "room", "drive"],
  "runtime_class": "gvisor", "allow": ["203.0.113.7:443", "[2001:db8::1]:8443"],
  "limits": {"cpu": "2", "memory": "4Gi", "ephemeral_storage": "2Gi", "deadline_seconds": 3600},
  "results_claim": "cleanroom-results"},
 {"name": "amber-case-1", "kind": "amber", "case_manifest_sha256": "` + hexC + `",
  "candidate": "acme/model-7", "image": "` + image + `", "command": ["cleanroom", "amber", "run"],
  "runtime_class": "runc",
  "limits": {"cpu": "500m", "memory": "1Gi", "ephemeral_storage": "512Mi", "deadline_seconds": 600}}
]`

// schemaCheckers are the two renderings of the Kubernetes OpenAPI schema
// the manifests are checked against: client-go's compiled schema of every
// built-in type (the one server-side apply uses), and the OpenAPI v3
// document of batch/v1 (with the core/v1 types it references) that
// client-go ships, turned into a type converter. Both refuse a field the
// schema does not declare and a value of the wrong type.
func schemaCheckers(t *testing.T) map[string]managedfields.TypeConverter {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{batchv1.AddToScheme, networkingv1.AddToScheme, corev1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	v3, err := openapi.NewTypeConverter(openapitest.NewEmbeddedFileClient(), false)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]managedfields.TypeConverter{
		"client-go schema":      applyconfigurations.NewTypeConverter(scheme),
		"OpenAPI v3 (batch/v1)": v3,
	}
}

// checkSchema checks one manifest document against every checker that
// knows its kind.
func checkSchema(t *testing.T, checkers map[string]managedfields.TypeConverter, doc []byte) error {
	t.Helper()
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		return err
	}
	for name, tc := range checkers {
		if name != "client-go schema" && u.GetKind() != "Job" {
			continue // the shipped v3 documents do not include networking.k8s.io/v1
		}
		if _, err := tc.ObjectToTyped(u); err != nil {
			return errors.New(name + ": " + err.Error())
		}
	}
	return nil
}

// documents splits a plan file into its YAML documents.
func documents(b []byte) [][]byte {
	var out [][]byte
	for d := range bytes.SplitSeq(b, []byte("\n---\n")) {
		if bytes.HasPrefix(bytes.TrimSpace(d), []byte("#")) {
			continue
		}
		out = append(out, d)
	}
	return out
}

func writePlan(t *testing.T) (string, []Run) {
	t.Helper()
	runs, err := ParseRuns([]byte(runList), "runs.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "plan")
	if _, err := WritePlan(runs, []byte(runList), dir); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "k8s"), runs
}

// Every manifest the plan writes decodes strictly into the k8s.io/api
// types and validates against the Kubernetes schema; a manifest with an
// undeclared field or a mistyped value does not (the check can fail).
func TestPlanManifestsValidate(t *testing.T) {
	t.Parallel()
	dir, _ := writePlan(t)
	checkers := schemaCheckers(t)
	kinds := map[string]int{}
	for _, name := range []string{"blind-model-a.yaml", "amber-case-1.yaml"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		docs := documents(b)
		if len(docs) != 2 {
			t.Fatalf("%s: %d documents, want 2 (NetworkPolicy, Job)", name, len(docs))
		}
		for i, doc := range docs {
			if err := checkSchema(t, checkers, doc); err != nil {
				t.Errorf("%s document %d: %v", name, i, err)
			}
			var obj any = &networkingv1.NetworkPolicy{}
			if i == 1 {
				obj = &batchv1.Job{}
			}
			// Strict: an unknown or duplicated field is an error.
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Errorf("%s document %d: strict decode: %v", name, i, err)
			}
			kinds[string(doc[:bytes.IndexByte(doc, '\n')])]++
		}
	}
	if kinds["apiVersion: batch/v1"] != 2 || kinds["apiVersion: networking.k8s.io/v1"] != 2 {
		t.Errorf("documents by apiVersion: %v", kinds)
	}
	// The validators refuse what the schema does not allow.
	b, _ := os.ReadFile(filepath.Join(dir, "amber-case-1.yaml"))
	job := documents(b)[1]
	for _, tc := range []struct{ name, old, new string }{
		{"undeclared field", "backoffLimit: 0", "backoffLimit: 0\n  retriesPlease: 3"},
		{"mistyped value", "automountServiceAccountToken: false", "automountServiceAccountToken: nope"},
		{"undeclared container field", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: true\n          hostNetwork: true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := bytes.Replace(job, []byte(tc.old), []byte(tc.new), 1)
			if bytes.Equal(bad, job) {
				t.Fatalf("%q not in the Job", tc.old)
			}
			for name, c := range checkers {
				if err := checkSchema(t, map[string]managedfields.TypeConverter{name: c}, bad); err == nil {
					t.Errorf("%s accepted the Job with %s", name, tc.name)
				}
			}
		})
	}
}

// The Job carries the run's hardening and its pinned identities; the
// NetworkPolicy allows exactly the allowlist. Expected values are the run
// list's literals.
func TestPlanJobAndPolicy(t *testing.T) {
	t.Parallel()
	dir, runs := writePlan(t)
	// The plan digest is the run list's bytes, hashed here independently.
	sum := sha256.Sum256([]byte(runList))
	planSHA := hex.EncodeToString(sum[:])
	for _, tc := range []struct {
		file, runtime, kind string
		identities          map[string]string
		egress              []string // cidr/port
		cpu, memory         string
		deadline            int64
		claim               string
	}{
		{"blind-model-a.yaml", "gvisor", "blind",
			map[string]string{AnnotationSrel: "srel-" + hexA, AnnotationBpkg: "bpkg-" + hexB, AnnotationCandidate: "candidate"},
			[]string{"203.0.113.7/32 443", "2001:db8::1/128 8443"}, "2", "4Gi", 3600, "cleanroom-results"},
		{"amber-case-1.yaml", "runc", "amber",
			map[string]string{AnnotationCaseManifest: hexC, AnnotationCandidate: "acme/model-7"},
			nil, "500m", "1Gi", 600, ""},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(dir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			docs := documents(b)
			var np networkingv1.NetworkPolicy
			var job batchv1.Job
			if err := yaml.UnmarshalStrict(docs[0], &np); err != nil {
				t.Fatal(err)
			}
			if err := yaml.UnmarshalStrict(docs[1], &job); err != nil {
				t.Fatal(err)
			}
			for _, ann := range []map[string]string{job.Annotations, job.Spec.Template.Annotations, np.Annotations} {
				if ann[AnnotationKind] != tc.kind {
					t.Errorf("kind annotation %q", ann[AnnotationKind])
				}
				for k, v := range tc.identities {
					if ann[k] != v {
						t.Errorf("annotation %s = %q, want %q", k, ann[k], v)
					}
				}
				for _, other := range []string{AnnotationSrel, AnnotationBpkg, AnnotationCaseManifest} {
					if _, want := tc.identities[other]; !want && ann[other] != "" {
						t.Errorf("annotation %s on a %s run", other, tc.kind)
					}
				}
			}
			ps := job.Spec.Template.Spec
			if ps.RuntimeClassName == nil || *ps.RuntimeClassName != tc.runtime {
				t.Errorf("runtimeClassName %v, want %s", ps.RuntimeClassName, tc.runtime)
			}
			if ps.HostNetwork || ps.HostPID || ps.HostIPC {
				t.Error("a host namespace is shared")
			}
			if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
				t.Error("the service-account token is mounted")
			}
			if ps.EnableServiceLinks == nil || *ps.EnableServiceLinks {
				t.Error("service links are injected")
			}
			if ps.RestartPolicy != corev1.RestartPolicyNever || job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 0 {
				t.Error("the run may be retried")
			}
			if job.Spec.ActiveDeadlineSeconds == nil || *job.Spec.ActiveDeadlineSeconds != tc.deadline {
				t.Errorf("activeDeadlineSeconds %v, want %d", job.Spec.ActiveDeadlineSeconds, tc.deadline)
			}
			if len(ps.Containers) != 1 || len(ps.InitContainers) != 0 {
				t.Fatalf("%d containers", len(ps.Containers))
			}
			c := ps.Containers[0]
			sc := c.SecurityContext
			switch {
			case sc == nil:
				t.Fatal("no container securityContext")
			case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
				t.Error("root filesystem writable")
			case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
				t.Error("privilege escalation allowed")
			case sc.Privileged == nil || *sc.Privileged:
				t.Error("privileged")
			case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0:
				t.Errorf("capabilities %+v", sc.Capabilities)
			case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
				t.Error("no RuntimeDefault seccomp")
			}
			if c.Image != image {
				t.Errorf("image %s", c.Image)
			}
			// The plan entry reaches the container (for fleet bind) and
			// the objects.
			run := runs[slices.IndexFunc(runs, func(r Run) bool { return r.Name == job.Name })]
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
			want := map[string]string{"CLEANROOM_RUN": job.Name, "CLEANROOM_RESULTS": "/results", "CLEANROOM_KIND": tc.kind,
				"CLEANROOM_RUN_SHA256": run.Digest, "CLEANROOM_PLAN_SHA256": planSHA}
			if !maps.Equal(env, want) {
				t.Errorf("env %v, want %v", env, want)
			}
			if job.Annotations[AnnotationPlanDigest] != planSHA || job.Annotations[AnnotationRunDigest] != run.Digest || len(run.Digest) != 64 {
				t.Errorf("plan entry annotations %v", job.Annotations)
			}
			lim, req := c.Resources.Limits, c.Resources.Requests
			if lim.Cpu().String() != tc.cpu || lim.Memory().String() != tc.memory || lim.StorageEphemeral().IsZero() {
				t.Errorf("limits %v", lim)
			}
			if !req.Cpu().Equal(*lim.Cpu()) || !req.Memory().Equal(*lim.Memory()) {
				t.Errorf("requests %v differ from limits %v", req, lim)
			}
			var claim string
			for _, v := range ps.Volumes {
				if v.Name == "results" && v.PersistentVolumeClaim != nil {
					claim = v.PersistentVolumeClaim.ClaimName
				}
				if v.HostPath != nil {
					t.Errorf("hostPath volume %s", v.Name)
				}
			}
			if claim != tc.claim {
				t.Errorf("results claim %q, want %q", claim, tc.claim)
			}
			// The policy selects this run's pods, which carry the label.
			if np.Spec.PodSelector.MatchLabels[LabelRun] != job.Name || job.Spec.Template.Labels[LabelRun] != job.Name {
				t.Errorf("policy selector %v, pod labels %v", np.Spec.PodSelector.MatchLabels, job.Spec.Template.Labels)
			}
			if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{"Ingress", "Egress"}) || len(np.Spec.Ingress) != 0 {
				t.Errorf("policy types %v, ingress %v", np.Spec.PolicyTypes, np.Spec.Ingress)
			}
			var egress []string
			for _, r := range np.Spec.Egress {
				if len(r.To) != 1 || r.To[0].IPBlock == nil || len(r.To[0].IPBlock.Except) != 0 || r.To[0].PodSelector != nil || r.To[0].NamespaceSelector != nil ||
					len(r.Ports) != 1 || r.Ports[0].Protocol == nil || *r.Ports[0].Protocol != corev1.ProtocolTCP || r.Ports[0].EndPort != nil {
					t.Fatalf("egress rule %+v", r)
				}
				egress = append(egress, r.To[0].IPBlock.CIDR+" "+r.Ports[0].Port.String())
			}
			if !slices.Equal(egress, tc.egress) {
				t.Errorf("egress %v, want %v", egress, tc.egress)
			}
		})
	}
}

// A run list breaking a rule is refused by that rule, at the member that
// breaks it.
func TestParseRunsRefusals(t *testing.T) {
	t.Parallel()
	good := func() *evidence.Object {
		o, err := evidence.ReadObject([]byte(`{"name": "r1", "kind": "blind", "srel": "srel-` + hexA + `", "bpkg": "bpkg-` + hexB + `",
 "candidate": "c", "image": "` + image + `", "command": ["x"], "runtime_class": "runc", "allow": [],
 "limits": {"cpu": "1", "memory": "1Gi", "ephemeral_storage": "1Gi", "deadline_seconds": 60}}`))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	limits := func(o *evidence.Object, k string, v any) {
		l, _ := o.Get("limits")
		if v == nil {
			l.(*evidence.Object).Delete(k)
		} else {
			l.(*evidence.Object).Set(k, v)
		}
	}
	for _, tc := range []struct {
		name    string
		edit    func(o *evidence.Object)
		list    string // used instead of the edited run when set
		rule    error
		pointer string
	}{
		{name: "not an array", list: `{"runs": []}`, rule: errRunShape, pointer: ""},
		{name: "empty list", list: `[]`, rule: errRunShape, pointer: ""},
		{name: "unknown member", edit: func(o *evidence.Object) { o.Set("privileged", true) }, rule: errRunShape, pointer: "/0/privileged"},
		{name: "missing limits", edit: func(o *evidence.Object) { o.Delete("limits") }, rule: errRunShape, pointer: "/0/limits"},
		{name: "bad name", edit: func(o *evidence.Object) { o.Set("name", "Run_1") }, rule: errName, pointer: "/0/name"},
		{name: "long name", edit: func(o *evidence.Object) { o.Set("name", strings.Repeat("a", 64)) }, rule: errName, pointer: "/0/name"},
		{name: "unknown kind", edit: func(o *evidence.Object) { o.Set("kind", "green") }, rule: errKind, pointer: "/0/kind"},
		{name: "blind with a case", edit: func(o *evidence.Object) { o.Set("case_manifest_sha256", hexC) }, rule: errKind, pointer: "/0/case_manifest_sha256"},
		{name: "short srel", edit: func(o *evidence.Object) { o.Set("srel", "srel-"+hexA[:63]) }, rule: errIdentity, pointer: "/0/srel"},
		{name: "uppercase bpkg", edit: func(o *evidence.Object) { o.Set("bpkg", "bpkg-"+strings.ToUpper(hexB)) }, rule: errIdentity, pointer: "/0/bpkg"},
		{name: "bare srel", edit: func(o *evidence.Object) { o.Set("srel", hexA) }, rule: errIdentity, pointer: "/0/srel"},
		{name: "srel as bpkg", edit: func(o *evidence.Object) { o.Set("bpkg", "srel-"+hexB) }, rule: errIdentity, pointer: "/0/bpkg"},
		{name: "image by tag", edit: func(o *evidence.Object) { o.Set("image", "registry.example/cleanroom:latest") }, rule: errImage, pointer: "/0/image"},
		{name: "empty command", edit: func(o *evidence.Object) { o.Set("command", []any{}) }, rule: errCommand, pointer: "/0/command"},
		{name: "runtime class", edit: func(o *evidence.Object) { o.Set("runtime_class", "kata") }, rule: errRuntimeClass, pointer: "/0/runtime_class"},
		{name: "host name", edit: func(o *evidence.Object) { o.Set("allow", []any{"api.example:443"}) }, rule: errAllowlist, pointer: "/0/allow/0"},
		{name: "unspecified address", edit: func(o *evidence.Object) { o.Set("allow", []any{"0.0.0.0:443"}) }, rule: errAllowlist, pointer: "/0/allow/0"},
		{name: "loopback", edit: func(o *evidence.Object) { o.Set("allow", []any{"127.0.0.1:80"}) }, rule: errAllowlist, pointer: "/0/allow/0"},
		{name: "no port", edit: func(o *evidence.Object) { o.Set("allow", []any{"203.0.113.7"}) }, rule: errAllowlist, pointer: "/0/allow/0"},
		{name: "twice", edit: func(o *evidence.Object) { o.Set("allow", []any{"203.0.113.7:1", "203.0.113.7:1"}) }, rule: errAllowlist, pointer: "/0/allow/1"},
		{name: "no memory limit", edit: func(o *evidence.Object) { limits(o, "memory", nil) }, rule: errLimits, pointer: "/0/limits/memory"},
		{name: "bad quantity", edit: func(o *evidence.Object) { limits(o, "cpu", "lots") }, rule: errLimits, pointer: "/0/limits/cpu"},
		{name: "zero memory", edit: func(o *evidence.Object) { limits(o, "memory", "0") }, rule: errLimits, pointer: "/0/limits/memory"},
		{name: "fractional deadline", edit: func(o *evidence.Object) { limits(o, "deadline_seconds", 1.5) }, rule: errLimits, pointer: "/0/limits/deadline_seconds"},
		{name: "bad claim", edit: func(o *evidence.Object) { o.Set("results_claim", "Results!") }, rule: errClaim, pointer: "/0/results_claim"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list := []byte(tc.list)
			if tc.list == "" {
				o := good()
				tc.edit(o)
				b, err := evidence.Stringify([]any{o}, " ")
				if err != nil {
					t.Fatal(err)
				}
				list = b
			}
			_, err := ParseRuns(list, "runs.json")
			if !errors.Is(err, tc.rule) {
				t.Fatalf("got %v, want %v", err, tc.rule)
			}
			var le *RunListError
			if !errors.As(err, &le) || le.Pointer != tc.pointer || le.File != "runs.json" {
				t.Errorf("refusal %#v, want pointer %q in runs.json", le, tc.pointer)
			}
			// The list was read and breaks a rule: exit 1 from every command.
			if c := fault.ClassOf(err); c != fault.Refused {
				t.Errorf("%v is %v, want %v", err, c, fault.Refused)
			}
		})
	}
	// Two runs with one name would be one Job.
	b, _ := evidence.Stringify([]any{good(), good()}, " ")
	if _, err := ParseRuns(b, "runs.json"); !errors.Is(err, errDuplicateRun) {
		t.Errorf("duplicate names: %v", err)
	}
	// The strict reader's refusals come through with their class.
	if _, err := ParseRuns([]byte(`[{"name": "a", "name": "b"}]`), "runs.json"); !errors.Is(err, evidence.ClassDuplicateName) {
		t.Errorf("duplicate member: %v", err)
	}
}

// A plan directory appears whole or not at all, and never over an existing one.
func TestWritePlanExclusive(t *testing.T) {
	t.Parallel()
	runs, err := ParseRuns([]byte(runList), "runs.json")
	if err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	dir := filepath.Join(parent, "plan")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := WritePlan(runs, []byte(runList), dir); !errors.Is(err, os.ErrExist) {
		t.Errorf("existing dir: %v, want ErrExist", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("wrote into the existing dir: %v", ents)
	}
	dir2 := filepath.Join(parent, "plan2")
	plan, err := WritePlan(runs, []byte(runList), dir2)
	if err != nil {
		t.Fatal(err)
	}
	// runs.json is beside k8s/, not in it: kubectl apply -f plan/k8s/
	// reads every .json and .yaml file of the directory it is given.
	for sub, want := range map[string][]string{"": {"k8s", "runs.json"}, "k8s": {"amber-case-1.yaml", "blind-model-a.yaml"}} {
		ents, _ := os.ReadDir(filepath.Join(dir2, sub))
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if !slices.Equal(names, want) || len(plan.Runs) != 2 {
			t.Errorf("plan files in %q: %v, want %v", sub, names, want)
		}
	}
	if plan.Runs[0].File != "k8s/blind-model-a.yaml" {
		t.Errorf("planned file %q", plan.Runs[0].File)
	}
	if b, _ := os.ReadFile(filepath.Join(dir2, RunsFileName)); string(b) != runList {
		t.Error("runs.json is not the list as given")
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 2 {
		t.Errorf("left behind in the parent: %v", ents)
	}
}

// The pods pass the Pod Security Standards' "restricted" level, evaluated
// by the checks Kubernetes' PodSecurity admission runs
// (k8s.io/pod-security-admission/policy); a pod spec with one setting
// loosened does not (the evaluation can fail).
func TestPlanPodSecurityRestricted(t *testing.T) {
	t.Parallel()
	runs, err := ParseRuns([]byte(runList), "runs.json")
	if err != nil {
		t.Fatal(err)
	}
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	restricted := psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}
	for _, r := range runs {
		tpl := Job(r).Spec.Template
		res := policy.AggregateCheckResults(eval.EvaluatePod(restricted, &tpl.ObjectMeta, &tpl.Spec))
		if !res.Allowed {
			t.Errorf("%s: restricted: %s: %s", r.Name, res.ForbiddenReason(), res.ForbiddenDetail())
		}
	}
	for _, tc := range []struct {
		name   string
		loosen func(*corev1.PodSpec)
	}{
		{"privilege escalation", func(p *corev1.PodSpec) { p.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr(true) }},
		{"a capability kept", func(p *corev1.PodSpec) { p.Containers[0].SecurityContext.Capabilities.Drop = nil }},
		{"no seccomp", func(p *corev1.PodSpec) {
			p.SecurityContext.SeccompProfile, p.Containers[0].SecurityContext.SeccompProfile = nil, nil
		}},
		{"host network", func(p *corev1.PodSpec) { p.HostNetwork = true }},
		{"host path", func(p *corev1.PodSpec) {
			p.Volumes[0].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpl := Job(runs[0]).Spec.Template
			tc.loosen(&tpl.Spec)
			if res := policy.AggregateCheckResults(eval.EvaluatePod(restricted, &tpl.ObjectMeta, &tpl.Spec)); res.Allowed {
				t.Error("restricted allowed the loosened pod")
			}
		})
	}
}

// A run's strings that reach the manifest (command arguments, the
// candidate in an annotation) cannot add a YAML document, a key or a
// container: the rendered Job decodes to exactly the planned command,
// image and annotations, and the file has the two planned documents.
func TestManifestYAMLInjection(t *testing.T) {
	t.Parallel()
	args := []any{"sh", "-c", "x\n---\napiVersion: v1\nkind: Pod\n", "a: b\n  privileged: true", "'\"{}[]&*!|>%@`#", "--- !!binary AAAA"}
	b, err := evidence.Stringify([]any{evidence.NewObject(
		evidence.Member{Name: "name", Value: "r1"}, evidence.Member{Name: "kind", Value: "amber"},
		evidence.Member{Name: "case_manifest_sha256", Value: hexC}, evidence.Member{Name: "candidate", Value: "acme/m:1+x"},
		evidence.Member{Name: "image", Value: image}, evidence.Member{Name: "command", Value: args},
		evidence.Member{Name: "runtime_class", Value: "runc"},
		evidence.Member{Name: "limits", Value: evidence.NewObject(evidence.Member{Name: "cpu", Value: "1"},
			evidence.Member{Name: "memory", Value: "1Gi"}, evidence.Member{Name: "ephemeral_storage", Value: "1Gi"},
			evidence.Member{Name: "deadline_seconds", Value: 60.0})},
	)}, " ")
	if err != nil {
		t.Fatal(err)
	}
	runs, err := ParseRuns(b, "runs.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := Manifest(runs[0])
	if err != nil {
		t.Fatal(err)
	}
	docs := documents(m)
	if len(docs) != 2 {
		t.Fatalf("%d documents, want 2:\n%s", len(docs), m)
	}
	var job batchv1.Job
	if err := yaml.UnmarshalStrict(docs[1], &job); err != nil {
		t.Fatal(err)
	}
	c := job.Spec.Template.Spec.Containers
	if len(c) != 1 || c[0].Image != image || len(c[0].Command) != len(args) {
		t.Fatalf("containers %+v", c)
	}
	for i, a := range args {
		if c[0].Command[i] != a {
			t.Errorf("command[%d] = %q, want %q", i, c[0].Command[i], a)
		}
	}
	if *c[0].SecurityContext.Privileged || job.Annotations[AnnotationCandidate] != "acme/m:1+x" {
		t.Errorf("security context %+v, annotations %v", c[0].SecurityContext, job.Annotations)
	}
}
