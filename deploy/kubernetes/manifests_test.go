// Package kubernetes holds the deployment files of chromafsd as a CSI node
// plugin; its test decodes every manifest into the Kubernetes API types,
// strictly (an unknown or misplaced field fails), and checks what the
// driver depends on. No kubelet runs in this test.
package kubernetes

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/yaml"

	"github.com/chromafs/chromafs/csi"
	"github.com/chromafs/chromafs/internal/testenv"
	"github.com/chromafs/chromafs/policy"
)

// objects are the manifests' documents, decoded by kind.
type objects struct {
	namespaces []corev1.Namespace
	drivers    []storagev1.CSIDriver
	daemonSets []appsv1.DaemonSet
	configMaps []corev1.ConfigMap
	secrets    []corev1.Secret
	pods       []corev1.Pod
	pvs        []corev1.PersistentVolume
	pvcs       []corev1.PersistentVolumeClaim
	files      map[string][]string // file → kinds
}

// strict decodes doc into v, refusing unknown and duplicate fields.
func strict[T any](t *testing.T, file string, doc []byte, list *[]T) {
	t.Helper()
	var v T
	if err := yaml.UnmarshalStrict(doc, &v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	*list = append(*list, v)
}

func load(t *testing.T) objects {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	o := objects{files: map[string][]string{}}
	for _, f := range files {
		if f == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(b, []byte("\n---\n")) {
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &head); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			o.files[f] = append(o.files[f], head.Kind)
			switch head.APIVersion + " " + head.Kind {
			case "v1 Namespace":
				strict(t, f, doc, &o.namespaces)
			case "storage.k8s.io/v1 CSIDriver":
				strict(t, f, doc, &o.drivers)
			case "apps/v1 DaemonSet":
				strict(t, f, doc, &o.daemonSets)
			case "v1 ConfigMap":
				strict(t, f, doc, &o.configMaps)
			case "v1 Secret":
				strict(t, f, doc, &o.secrets)
			case "v1 Pod":
				strict(t, f, doc, &o.pods)
			case "v1 PersistentVolume":
				strict(t, f, doc, &o.pvs)
			case "v1 PersistentVolumeClaim":
				strict(t, f, doc, &o.pvcs)
			default:
				t.Fatalf("%s: unexpected %s %s", f, head.APIVersion, head.Kind)
			}
		}
	}
	return o
}

func TestCSIDriver(t *testing.T) {
	o := load(t)
	if len(o.drivers) != 1 {
		t.Fatalf("%d CSIDriver objects", len(o.drivers))
	}
	d := o.drivers[0]
	if d.Name != csi.DriverName {
		t.Errorf("CSIDriver %q, the plugin says %q", d.Name, csi.DriverName)
	}
	if d.Spec.PodInfoOnMount == nil || !*d.Spec.PodInfoOnMount {
		t.Error("podInfoOnMount must be true: the policy judges the pod's namespace and service account")
	}
	if d.Spec.AttachRequired == nil || *d.Spec.AttachRequired {
		t.Error("attachRequired must be false: there is no controller")
	}
	modes := d.Spec.VolumeLifecycleModes
	if !slices.Contains(modes, storagev1.VolumeLifecycleEphemeral) || !slices.Contains(modes, storagev1.VolumeLifecyclePersistent) {
		t.Errorf("volumeLifecycleModes %v: want Ephemeral and Persistent", modes)
	}
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

func mountOf(c corev1.Container, path string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == path {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func volumeOf(spec corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

func TestDaemonSet(t *testing.T) {
	o := load(t)
	if len(o.daemonSets) != 1 {
		t.Fatalf("%d DaemonSets", len(o.daemonSets))
	}
	ds := o.daemonSets[0]
	spec := ds.Spec.Template.Spec
	if ds.Spec.Selector == nil || ds.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != ds.Spec.Template.Labels["app.kubernetes.io/name"] {
		t.Error("the selector does not select the template's labels")
	}
	c := container(t, spec, "chromafsd")
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Error("chromafsd must be privileged (FUSE mounts, Bidirectional propagation)")
	}
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"--csi-endpoint=unix:///csi/csi.sock", "--node-id=$(NODE_NAME)", "--state-dir=/var/lib/chromafs", "--policy=/etc/chromafs/policy.yaml"} {
		if !strings.Contains(args, want) {
			t.Errorf("chromafsd's args lack %s: %s", want, args)
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env["NODE_NAME"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("NODE_NAME must come from spec.nodeName: %+v", e)
	}
	if _, ok := env["CHROMA_TOKEN"]; ok {
		t.Error("the token is an environment variable: it must be a file (--token-file) from a Secret")
	}
	checkTokenFile(t, o, ds, c)
	checkImage(t, c)

	hostPath := func(mountPath string) (string, *corev1.VolumeMount) {
		m := mountOf(c, mountPath)
		if m == nil {
			t.Fatalf("chromafsd mounts nothing at %s", mountPath)
		}
		v := volumeOf(spec, m.Name)
		if v == nil || v.HostPath == nil {
			t.Fatalf("%s is not a hostPath volume", mountPath)
		}
		return v.HostPath.Path, m
	}
	if p, m := hostPath("/var/lib/kubelet"); p != "/var/lib/kubelet" || m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationBidirectional {
		t.Errorf("the kubelet directory: host %s, propagation %v; want /var/lib/kubelet, Bidirectional", p, m.MountPropagation)
	}
	if p, _ := hostPath("/dev/fuse"); p != "/dev/fuse" {
		t.Errorf("/dev/fuse from %s", p)
	}
	if p, _ := hostPath("/var/lib/chromafs"); p != "/var/lib/chromafs" {
		t.Errorf("the state directory must be the host's (restarts keep the attachments): %s", p)
	}
	pluginDir, _ := hostPath("/csi")
	if pluginDir != "/var/lib/kubelet/plugins/"+csi.DriverName {
		t.Errorf("plugin directory %s: kubelet's plugins/%s", pluginDir, csi.DriverName)
	}
	if m := mountOf(c, "/etc/chromafs"); m == nil || volumeOf(spec, m.Name) == nil || volumeOf(spec, m.Name).ConfigMap == nil {
		t.Error("the policy is not mounted from a ConfigMap at /etc/chromafs")
	} else if name := volumeOf(spec, m.Name).ConfigMap.Name; !slices.ContainsFunc(o.configMaps, func(cm corev1.ConfigMap) bool { return cm.Name == name && cm.Namespace == ds.Namespace }) {
		t.Errorf("no ConfigMap %s in %s", name, ds.Namespace)
	}

	r := container(t, spec, "node-driver-registrar")
	rargs := strings.Join(r.Args, " ")
	if !strings.Contains(rargs, "--csi-address=/csi/csi.sock") || !strings.Contains(rargs, "--kubelet-registration-path="+pluginDir+"/csi.sock") {
		t.Errorf("node-driver-registrar's args %s: want the plugin's socket, in the container and on the host", rargs)
	}
	if m := mountOf(r, "/registration"); m == nil || volumeOf(spec, m.Name).HostPath == nil || volumeOf(spec, m.Name).HostPath.Path != "/var/lib/kubelet/plugins_registry" {
		t.Error("node-driver-registrar needs kubelet's plugins_registry at /registration")
	}
	checkFlags(t, c.Args)
}

// checkTokenFile: --token-file names a file of a Secret volume whose mode
// only its owner may read (chromafsd refuses any other), and the Secret
// holds that key.
func checkTokenFile(t *testing.T, o objects, ds appsv1.DaemonSet, c corev1.Container) {
	t.Helper()
	var file string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--token-file="); ok {
			file = v
		}
	}
	m := mountOf(c, filepath.Dir(file))
	if file == "" || m == nil || volumeOf(ds.Spec.Template.Spec, m.Name) == nil || volumeOf(ds.Spec.Template.Spec, m.Name).Secret == nil {
		t.Fatalf("--token-file %q is not a file of a Secret volume", file)
	}
	sec := volumeOf(ds.Spec.Template.Spec, m.Name).Secret
	if sec.DefaultMode == nil || *sec.DefaultMode&0o077 != 0 {
		t.Errorf("the token's Secret volume has mode %v: chromafsd refuses a token file group or others may read", sec.DefaultMode)
	}
	key := filepath.Base(file)
	if !slices.ContainsFunc(o.secrets, func(s corev1.Secret) bool {
		_, ok := s.StringData[key]
		return s.Name == sec.SecretName && s.Namespace == ds.Namespace && ok
	}) {
		t.Errorf("no Secret %s with key %s in %s", sec.SecretName, key, ds.Namespace)
	}
}

// checkImage: chromafsd's image is the one scripts/image.sh builds.
func checkImage(t *testing.T, c corev1.Container) {
	t.Helper()
	b, err := os.ReadFile("../../scripts/image.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^IMAGE_NAME="([^"]+)"$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("scripts/image.sh names no IMAGE_NAME")
	}
	if want := string(m[1]) + ":latest"; c.Image != want {
		t.Errorf("chromafsd's image %s; scripts/image.sh builds %s", c.Image, want)
	}
}

// checkFlags: every flag the DaemonSet passes is one chromafsd has.
func checkFlags(t *testing.T, args []string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "no go command: chromafsd's flags not checked")
		return
	}
	bin := filepath.Join(t.TempDir(), "chromafsd")
	if out, err := exec.Command(goBin, "build", "-o", bin, "../../cmd/chromafsd").CombinedOutput(); err != nil {
		t.Fatalf("building chromafsd: %v\n%s", err, out)
	}
	help, _ := exec.Command(bin, "--help").CombinedOutput()
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !bytes.Contains(help, []byte("-"+name+" ")) && !bytes.Contains(help, []byte("-"+name+"\n")) {
			t.Errorf("chromafsd has no flag --%s", name)
		}
	}
}

func TestPolicyConfigMap(t *testing.T) {
	o := load(t)
	var text string
	for _, cm := range o.configMaps {
		if cm.Name == "chromafs-policy" {
			text = cm.Data["policy.yaml"]
		}
	}
	p, err := policy.Parse([]byte(text))
	if err != nil {
		t.Fatalf("the ConfigMap's policy: %v", err)
	}
	agents := policy.Subject{Pod: &policy.Pod{Namespace: "agents", ServiceAccount: "default"}}
	if err := p.Allow(agents, "docs", []string{"billing"}); err != nil {
		t.Errorf("namespace agents, billing: %v", err)
	}
	if err := p.Allow(agents, "docs", []string{"internal"}); err == nil {
		t.Error("namespace agents may ask for internal")
	}
	if err := p.Allow(policy.Subject{Pod: &policy.Pod{Namespace: "support", ServiceAccount: "helpdesk"}}, "docs", []string{"billing", "internal"}); err != nil {
		t.Errorf("support/helpdesk: %v", err)
	}
}

// TestExamples: the example pods ask for what the policy grants, read-only,
// with HostToContainer propagation; the PV is the driver's and bound by
// the claim.
func TestExamples(t *testing.T) {
	o := load(t)
	var inline, claim int
	for _, pod := range o.pods {
		for _, c := range pod.Spec.Containers {
			for _, m := range c.VolumeMounts {
				v := volumeOf(pod.Spec, m.Name)
				if v == nil {
					t.Fatalf("pod %s mounts no volume %s", pod.Name, m.Name)
				}
				if v.CSI == nil && v.PersistentVolumeClaim == nil {
					continue
				}
				if !m.ReadOnly || m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer {
					t.Errorf("pod %s, %s: want readOnly and HostToContainer (a restart's new mount reaches the container)", pod.Name, m.MountPath)
				}
				switch {
				case v.CSI != nil:
					inline++
					if v.CSI.Driver != csi.DriverName || v.CSI.ReadOnly == nil || !*v.CSI.ReadOnly || v.CSI.VolumeAttributes["collection"] == "" {
						t.Errorf("pod %s: inline volume %+v: want driver %s, readOnly, a collection", pod.Name, v.CSI, csi.DriverName)
					}
					if _, err := csi.ParseContext(v.CSI.VolumeAttributes); err != nil {
						t.Errorf("pod %s: %v", pod.Name, err)
					}
				case v.PersistentVolumeClaim != nil:
					claim++
					if !v.PersistentVolumeClaim.ReadOnly {
						t.Errorf("pod %s: the claim is not read-only", pod.Name)
					}
				}
			}
		}
	}
	if inline == 0 || claim == 0 {
		t.Errorf("%d inline volumes and %d claims in the examples: want both", inline, claim)
	}
	if len(o.pvs) != 1 || len(o.pvcs) != 1 {
		t.Fatalf("%d PVs, %d PVCs", len(o.pvs), len(o.pvcs))
	}
	pv, pvc := o.pvs[0], o.pvcs[0]
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != csi.DriverName || pv.Spec.CSI.VolumeHandle == "" || !pv.Spec.CSI.ReadOnly {
		t.Errorf("PV %s: %+v", pv.Name, pv.Spec.CSI)
	} else if _, err := csi.ParseContext(pv.Spec.CSI.VolumeAttributes); err != nil {
		t.Errorf("PV %s: %v", pv.Name, err)
	}
	if !slices.Equal(pv.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}) || !slices.Equal(pvc.Spec.AccessModes, pv.Spec.AccessModes) {
		t.Errorf("access modes: PV %v, PVC %v; want ReadOnlyMany", pv.Spec.AccessModes, pvc.Spec.AccessModes)
	}
	if pvc.Spec.VolumeName != pv.Name || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "" {
		t.Errorf("the claim does not bind the PV statically: %+v", pvc.Spec)
	}
}

// TestKustomization: kubectl apply -k applies every file but the examples.
func TestKustomization(t *testing.T) {
	b, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatal(err)
	}
	o := load(t)
	for f := range o.files {
		want := !strings.HasPrefix(f, "example-")
		if slices.Contains(k.Resources, f) != want {
			t.Errorf("kustomization: %s listed %v, want %v", f, !want, want)
		}
	}
}
