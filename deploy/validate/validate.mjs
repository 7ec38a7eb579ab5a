// Validates every Kubernetes object in the *.yaml files of a directory against the Kubernetes API's schemas
// (the OpenAPI definitions compiled into the kubernetes-models package): field types, required fields, enums and
// formats. Prints one line per object; exits 1 when any object is invalid or of a kind it has no schema for.
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
      console.log(`${file}: ${name}: valid`);
    } catch (e) {
      console.log(`${file}: ${name}: ${e.message}`);
      failed = true;
    }
  }
}
process.exit(failed ? 1 : 0);
