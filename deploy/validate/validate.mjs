// Validates every Kubernetes object in the *.yaml files of a directory against the Kubernetes API's schemas
// (the OpenAPI definitions compiled into the kubernetes-models package): field types, required fields, enums and
// formats; and the project's own rule for the proxy's configuration (ProjectPolicy). Prints one line per object;
// exits 1 when any object is invalid or of a kind it has no schema for.
// Usage: node deploy/validate/validate.mjs DIR   (after `npm ci` in deploy/validate; scripts/test.sh does it)
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import * as core from "kubernetes-models/v1";
import * as apps from "kubernetes-models/apps/v1";
import * as rbac from "kubernetes-models/rbac.authorization.k8s.io/v1";
import * as storage from "kubernetes-models/storage.k8s.io/v1";

const groups = { v1: core, "apps/v1": apps, "rbac.authorization.k8s.io/v1": rbac, "storage.k8s.io/v1": storage };
const dir = process.argv[2];
if (!dir) {
  console.error("usage: validate.mjs DIR");
  process.exit(2);
}
// What the project asks of its own objects beyond the schemas: the proxy's configuration turns the audit log on, so
// that every mutating call is on record from the first day; a HostProcess pod (Windows) asks for the node's
// network, which the API server requires of it, and only Windows nodes. Returns why an object breaks that, or "".
function ProjectPolicy(obj) {
  const pod = obj.spec?.template?.spec;
  if (pod?.securityContext?.windowsOptions?.hostProcess === true) {
    if (pod.hostNetwork !== true) return "a HostProcess pod needs hostNetwork: true (the API server refuses it otherwise)";
    if (pod.nodeSelector?.["kubernetes.io/os"] !== "windows") {
      return "a HostProcess pod must select Windows nodes (nodeSelector kubernetes.io/os: windows)";
    }
  }
  const toml = obj.kind === "ConfigMap" ? obj.data?.["csi-proxy.toml"] : undefined;
  if (toml === undefined) return "";
  const host = toml.split(/^\[/m).find((table) => table.startsWith("host]")) ?? "";
  if (!/^\s*audit_log\s*=\s*"[^"]+"/m.test(host)) {
    return "csi-proxy.toml does not turn the audit log on ([host] audit_log)";
  }
  return "";
}

let failed = false;
const files = readdirSync(dir).filter((f) => f.endsWith(".yaml") || f.endsWith(".yml")).sort();
if (files.length === 0) {
  console.error(`${dir}: no .yaml files`);
  process.exit(1);
}
for (const file of files) {
  for (const doc of parseAllDocuments(readFileSync(join(dir, file), "utf8"))) {
    if (doc.errors.length > 0) {
      console.log(`${file}: YAML error: ${doc.errors[0].message}`);
      failed = true;
      continue;
    }
    const obj = doc.toJS();
    if (obj === null) continue;
    const name = `${obj.kind} ${obj.metadata?.namespace ? obj.metadata.namespace + "/" : ""}${obj.metadata?.name}`;
    const Model = groups[obj.apiVersion]?.[obj.kind];
    if (!Model) {
      console.log(`${file}: ${name}: no schema for ${obj.apiVersion} ${obj.kind}`);
      failed = true;
      continue;
    }
    try {
      new Model(obj).validate();
      const policy = ProjectPolicy(obj);
      if (policy) {
        console.log(`${file}: ${name}: ${policy}`);
        failed = true;
        continue;
      }
      console.log(`${file}: ${name}: valid`);
    } catch (e) {
      console.log(`${file}: ${name}: ${e.message}`);
      failed = true;
    }
  }
}
process.exit(failed ? 1 : 0);
