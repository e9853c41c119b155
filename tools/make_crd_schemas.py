#!/usr/bin/env python3
"""Writes the JSON schemas that tests/deploy/k8s_manifests_test.py validates custom resources
against (PodMonitor, InferencePool, HTTPRoute): the openAPIV3Schema of the storage version from the
CustomResourceDefinition its project publishes, without descriptions.

Usage: tools/make_crd_schemas.py OUT_DIR SOURCE CRD.yaml [SOURCE CRD.yaml ...]
  SOURCE names where the CRD came from (repository@tag:path); it is recorded in the schema.

The committed schemas were made from these releases (all Apache-2.0):
  prometheus-operator/prometheus-operator@v0.93.0:
      example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml
  kubernetes-sigs/gateway-api-inference-extension@v1.6.0:
      config/crd/bases/inference.networking.k8s.io_inferencepools.yaml
  kubernetes-sigs/gateway-api@v1.6.1: config/crd/standard/gateway.networking.k8s.io_httproutes.yaml
"""
import json
import os
import sys

import yaml


def strip_descriptions(node):
    if isinstance(node, dict):
        return {k: strip_descriptions(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [strip_descriptions(v) for v in node]
    return node


def main(argv):
    if len(argv) < 4 or len(argv) % 2 != 0:
        sys.exit(__doc__)
    out_dir = argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for source, path in zip(argv[2::2], argv[3::2]):
        with open(path) as f:
            crd = next(d for d in yaml.safe_load_all(f) if d)
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if not version.get("storage", False):
                continue
            schema = strip_descriptions(version["schema"]["openAPIV3Schema"])
            schema["x-df11-source"] = source
            name = f"{kind.lower()}-{group}-{version['name']}.json"
            with open(os.path.join(out_dir, name), "w") as f:
                json.dump(schema, f, indent=1, sort_keys=True)
                f.write("\n")
            print(name)


if __name__ == "__main__":
    main(sys.argv)
