#!/usr/bin/env python3
"""deploy/k8s: every kustomization names each file of its folder once and only files that exist;
the overlays and the router render to resources that are each defined once and validate strictly
(unknown fields fail) against the Kubernetes schemas of a pinned version, custom resources against
their CRDs' committed schemas (tests/data/k8s/crd-schemas, made by tools/make_crd_schemas.py); the
references inside agree (ConfigMaps, Secrets, volumes, named ports, the labels the Services, the
PodMonitor and the router's InferencePool select on).

Rendering: a small renderer of the kustomize features deploy/k8s uses (resources, namespace,
configMapGenerator, strategic-merge patches, images). Where `kubectl kustomize` (kustomize v4 or
later) is installed, its output must equal the renderer's, up to generated ConfigMap name hashes.
"""
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import unittest

import jsonschema
import kubernetes_validate
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
K8S = os.path.join(ROOT, "deploy", "k8s")
CRD_SCHEMAS = os.path.join(ROOT, "tests", "data", "k8s", "crd-schemas")
KUBERNETES_VERSION = "1.33"  # the oldest Kubernetes release the manifests are checked against
RENDERED = ["overlays/gpu", "overlays/cpu", "router", "monitoring"]

# Kinds with no namespace (kustomize's namespace: leaves them alone).
CLUSTER_SCOPED = {"Namespace", "PriorityClass", "ClusterRole", "ClusterRoleBinding",
                  "CustomResourceDefinition", "StorageClass"}
# Strategic-merge keys of the lists the patches touch (Kubernetes' patchMergeKey); other lists
# are replaced, as Kubernetes does for lists without one.
MERGE_KEYS = {"containers": "name", "initContainers": "name", "volumes": "name",
              "volumeMounts": "mountPath", "env": "name", "ports": "containerPort"}


def load_yaml_documents(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def strategic_merge(base, patch):
    """Kubernetes' strategic merge patch for maps and for lists with a merge key."""
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif key in MERGE_KEYS and isinstance(value, list) and isinstance(out.get(key), list):
            merge_key = MERGE_KEYS[key]
            items = out[key]
            for item in value:
                match = [i for i, b in enumerate(items) if b.get(merge_key) == item.get(merge_key)]
                if match:
                    items[match[0]] = strategic_merge(items[match[0]], item)
                else:
                    items.append(copy.deepcopy(item))
        else:
            out[key] = strategic_merge(out.get(key), value)
    return out


def resource_id(r):
    group = r["apiVersion"].split("/")[0] if "/" in r["apiVersion"] else ""
    return (group, r["kind"], r["metadata"].get("namespace", ""), r["metadata"]["name"])


def pod_spec(r):
    return r["spec"]["template"]["spec"] if r["kind"] in ("DaemonSet", "Deployment") else None


def render(directory):
    """The resources `kubectl kustomize directory` outputs, for the features deploy/k8s uses."""
    k = load_yaml_documents(os.path.join(directory, "kustomization.yaml"))[0]
    known = {"apiVersion", "kind", "resources", "namespace", "configMapGenerator", "patches",
             "images"}
    unknown = set(k) - known
    if unknown:
        raise ValueError(f"{directory}/kustomization.yaml: the renderer does not know {unknown}")
    resources = []
    for entry in k.get("resources", []):
        path = os.path.join(directory, entry)
        resources += render(path) if os.path.isdir(path) else load_yaml_documents(path)
    for generator in k.get("configMapGenerator", []):
        data = {}
        for f in generator["files"]:
            with open(os.path.join(directory, f)) as stream:
                data[os.path.basename(f)] = stream.read()
        metadata = {"name": generator["name"]}
        if "namespace" in generator:
            metadata["namespace"] = generator["namespace"]
        labels = generator.get("options", {}).get("labels")
        if labels:
            metadata["labels"] = dict(labels)
        resources.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
                          "data": data})
    if "namespace" in k:
        for r in resources:
            if r["kind"] not in CLUSTER_SCOPED:
                r["metadata"]["namespace"] = k["namespace"]
            # A binding's service accounts move with it.
            for subject in r.get("subjects", []) if r["kind"].endswith("RoleBinding") else []:
                if subject["kind"] == "ServiceAccount":
                    subject["namespace"] = k["namespace"]
    for p in k.get("patches", []):
        for patch in load_yaml_documents(os.path.join(directory, p["path"])):
            targets = [i for i, r in enumerate(resources)
                       if r["kind"] == patch["kind"]
                       and r["metadata"]["name"] == patch["metadata"]["name"]]
            if len(targets) != 1:
                raise ValueError(f"{p['path']}: {len(targets)} resources match its target")
            patch_body = {key: v for key, v in patch.items() if key not in ("apiVersion", "kind")}
            patch_body["metadata"] = {key: v for key, v in patch["metadata"].items()
                                      if key not in ("name", "namespace")}
            resources[targets[0]] = strategic_merge(resources[targets[0]], patch_body)
    for image in k.get("images", []):
        for r in resources:
            spec = pod_spec(r)
            for c in (spec or {}).get("containers", []) + (spec or {}).get("initContainers", []):
                name, _, tag = c["image"].partition(":")
                if name == image["name"]:
                    c["image"] = image.get("newName", name) + ":" + image.get("newTag", tag)
    return resources


def kustomize_renders():
    """Whether `kubectl kustomize` with kustomize v4 or later (the syntax used here) is there."""
    if shutil.which("kubectl") is None:
        return False
    out = subprocess.run(["kubectl", "version", "--client"], capture_output=True, text=True)
    m = re.search(r"Kustomize Version: v(\d+)", out.stdout)
    return m is not None and int(m.group(1)) >= 4


def strict(schema):
    """The CRD schema with unknown fields refused, as `kubectl apply --validate=strict` does."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if ("properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def validate(resource):
    """Raises with the path of the first error; checks the CRD's schema for a custom resource."""
    try:
        kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)
        return
    except kubernetes_validate.SchemaNotFoundError:
        pass
    group, _, version = resource["apiVersion"].rpartition("/")
    path = os.path.join(CRD_SCHEMAS, f"{resource['kind'].lower()}-{group}-{version}.json")
    if not os.path.exists(path):
        raise AssertionError(f"no schema for {resource['apiVersion']} {resource['kind']}")
    with open(path) as f:
        schema = json.load(f)
    schema.pop("x-df11-source")
    # metadata is ObjectMeta, which the API server checks for every kind alike.
    body = {k: v for k, v in resource.items() if k != "metadata"}
    schema["properties"].pop("metadata", None)
    jsonschema.validate(body, strict(schema))


class KustomizationsTest(unittest.TestCase):
    def test_each_file_is_listed_once_and_every_listed_file_exists(self):
        for dirpath, _, files in os.walk(K8S):
            if "kustomization.yaml" not in files:
                continue
            with self.subTest(directory=os.path.relpath(dirpath, ROOT)):
                k = load_yaml_documents(os.path.join(dirpath, "kustomization.yaml"))[0]
                listed = list(k.get("resources", []))
                listed += [p["path"] for p in k.get("patches", [])]
                for g in k.get("configMapGenerator", []):
                    listed += g["files"]
                self.assertEqual(len(listed), len(set(listed)), f"listed twice: {listed}")
                for entry in listed:
                    self.assertTrue(os.path.exists(os.path.join(dirpath, entry)), entry)
                unlisted = {f for f in files if f.endswith((".yaml", ".json"))} - set(listed)
                self.assertEqual(unlisted, {"kustomization.yaml"}, "files no kustomization names")


class RenderedManifestsTest(unittest.TestCase):
    rendered = {}

    @classmethod
    def setUpClass(cls):
        for d in RENDERED:
            cls.rendered[d] = render(os.path.join(K8S, d))

    def test_each_resource_is_defined_once_and_validates_strictly(self):
        for d, resources in self.rendered.items():
            ids = [resource_id(r) for r in resources]
            self.assertEqual(len(ids), len(set(ids)), f"{d}: a resource defined twice")
            for r in resources:
                with self.subTest(overlay=d, resource=resource_id(r)):
                    validate(r)

    def test_a_field_schemas_do_not_know_fails(self):
        for d in ("overlays/gpu", "router"):
            for r in self.rendered[d]:
                if r["kind"] not in ("DaemonSet", "InferencePool"):
                    continue
                broken = copy.deepcopy(r)
                broken["spec"]["replicaz"] = 1
                with self.assertRaises((kubernetes_validate.ValidationError,
                                        jsonschema.ValidationError), msg=r["kind"]):
                    validate(broken)

    def test_references_inside_an_overlay_agree(self):
        for d in ("overlays/gpu", "overlays/cpu"):
            with self.subTest(overlay=d):
                resources = self.rendered[d]
                by_kind = {}
                for r in resources:
                    by_kind.setdefault(r["kind"], []).append(r)
                (ds,) = by_kind["DaemonSet"]
                spec = pod_spec(ds)
                labels = ds["spec"]["template"]["metadata"]["labels"]
                self.assertEqual(labels["app.kubernetes.io/name"], "df11d")
                self.assertEqual(labels["llm-d.ai/engine-type"], "df11d")
                for key, value in ds["spec"]["selector"]["matchLabels"].items():
                    self.assertEqual(labels[key], value)
                config_maps = {r["metadata"]["name"] for r in by_kind["ConfigMap"]}
                volumes = {v["name"]: v for v in spec["volumes"]}
                for v in volumes.values():
                    if "configMap" in v:
                        self.assertIn(v["configMap"]["name"], config_maps)
                    if "secret" in v:
                        # The hub and peer tokens are optional; without API tokens a pod must
                        # not serve.
                        self.assertEqual(bool(v["secret"].get("optional")),
                                         v["secret"]["secretName"] in ("df11d-hf-token",
                                                                       "df11d-peer-token"),
                                         v["name"])
                ports = {}
                for c in spec["containers"] + spec.get("initContainers", []):
                    for m in c.get("volumeMounts", []):
                        self.assertIn(m["name"], volumes)
                    for p in c.get("ports", []):
                        ports[p["name"]] = p["containerPort"]
                for svc in by_kind["Service"]:
                    self.assertEqual(svc["spec"]["selector"], {"app.kubernetes.io/name": "df11d"})
                    for p in svc["spec"]["ports"]:
                        self.assertIn(p["targetPort"], ports)
                (pm,) = [r for r in self.rendered["monitoring"] if r["kind"] == "PodMonitor"]
                self.assertEqual(pm["spec"]["selector"]["matchLabels"],
                                 {"app.kubernetes.io/name": "df11d"})
                self.assertIn(pm["spec"]["podMetricsEndpoints"][0]["port"], ports)
                self.assertEqual(spec["serviceAccountName"],
                                 by_kind["ServiceAccount"][0]["metadata"]["name"])
                self.assertEqual(spec["priorityClassName"],
                                 by_kind["PriorityClass"][0]["metadata"]["name"])
                # The router's pool selects these pods on df11d's HTTP port.
                (pool,) = [r for r in self.rendered["router"] if r["kind"] == "InferencePool"]
                for key, value in pool["spec"]["selector"]["matchLabels"].items():
                    self.assertEqual(labels[key], value)
                self.assertEqual(pool["spec"]["targetPorts"][0]["number"], ports["http"])

    def test_the_gpu_overlay_asks_for_a_gpu_and_tolerates_gpu_nodes(self):
        (ds,) = [r for r in self.rendered["overlays/gpu"] if r["kind"] == "DaemonSet"]
        spec = pod_spec(ds)
        (df11d,) = [c for c in spec["containers"] if c["name"] == "df11d"]
        self.assertEqual(df11d["resources"]["limits"]["nvidia.com/gpu"], 1)
        self.assertIn("nvidia.com/gpu", [t["key"] for t in spec["tolerations"]])
        # The patch merged into the base's container rather than replacing it.
        self.assertIn("memory", df11d["resources"]["limits"])
        self.assertTrue(df11d["securityContext"]["readOnlyRootFilesystem"])

    def test_each_overlay_runs_its_image(self):
        for d, suffix in (("overlays/gpu", ""), ("overlays/cpu", "-cpu")):
            (ds,) = [r for r in self.rendered[d] if r["kind"] == "DaemonSet"]
            spec = pod_spec(ds)
            for c in spec["containers"] + spec["initContainers"]:
                self.assertRegex(c["image"], rf"df11d:\d+\.\d+\.\d+{suffix}$", d)

    def test_kubectl_kustomize_renders_the_same(self):
        if not kustomize_renders():
            self.skipTest("kubectl with kustomize v4+ is not installed")
        for d, resources in self.rendered.items():
            with self.subTest(overlay=d):
                out = subprocess.run(["kubectl", "kustomize", os.path.join(K8S, d)],
                                     capture_output=True, text=True, check=True).stdout
                # Generated ConfigMaps carry a hash of their content in their name.
                out = re.sub(r"(df11d-config)-[a-z0-9]{10}\b", r"\1", out)
                theirs = sorted((d for d in yaml.safe_load_all(out) if d), key=resource_id)
                self.assertEqual(theirs, sorted(resources, key=resource_id))


if __name__ == "__main__":
    unittest.main(verbosity=2, argv=sys.argv[:1])
