#!/usr/bin/env node
// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// validate.js: checks every object of a rendered manifest (`kubectl kustomize manifests/`) the way
// the API server of the target version would, offline.
//
//   node tests/manifests/validate.js FILE.yaml...  exit 0: every object of every file is valid;
//                                                  1: errors, one line each, naming the file,
//                                                  the object and the path
//
// - The schema: kubernetes-models 4.5.1 carries the OpenAPI schemas of Kubernetes 1.33 compiled
//   into validators (ajv), and @kubernetes-models/prometheus-operator 5.0.1 those of the
//   Prometheus Operator's CRDs (the monitoring component's PodMonitor and PrometheusRule); each
//   object is checked against the schema of its apiVersion and kind, and an object of a kind
//   they do not know is an error.
// - Unknown fields: the compiled schemas let them through, but the API server refuses them
//   (kubectl's default field validation is Strict). The object is handed to the validator behind
//   proxies that record which fields the validator reads: a schema reads every field it defines,
//   so a field nobody read is one the schema does not have. Objects the schema treats as maps
//   (labels, ConfigMap data) are enumerated, which marks every key as known.
// - A few checks the API server makes beyond the schema: the selector of a DaemonSet or
//   Deployment matches its template's labels, every volumeMount names a volume of the pod, a probe
//   on a named port names a port of its container, and names in a pod are unique.
"use strict";

const fs = require("fs");
const path = require("path");
const YAML = require("yaml");

// The compiled schemas are not in the package's exports: load them by path.
const SCHEMAS = path.join(path.dirname(require.resolve("kubernetes-models")), "_schemas");

// API group (the part of apiVersion before the slash) -> the word kubernetes-models uses.
const GROUPS = {
	"": "Core",
	apps: "Apps",
	batch: "Batch",
	policy: "Policy",
	"networking.k8s.io": "Networking",
	"rbac.authorization.k8s.io": "Rbac",
	"scheduling.k8s.io": "Scheduling",
	"storage.k8s.io": "Storage",
};

// The Prometheus Operator's CRDs (manifests/monitoring): their schemas, compiled the same way,
// from @kubernetes-models/prometheus-operator, which ships ES modules only: main() imports them
// all before any file is read. Validator name (MonitoringCoreosComV1PodMonitor) -> validate.
const OPERATOR_SCHEMAS = path.join(
	__dirname,
	"node_modules/@kubernetes-models/prometheus-operator/_schemas"
);
const operator = {};

async function loadOperatorSchemas() {
	const { pathToFileURL } = require("url");
	for (const f of fs.readdirSync(OPERATOR_SCHEMAS))
		if (/^MonitoringCoreosCom[A-Za-z0-9]+\.js$/.test(f))
			operator[f.slice(0, -3)] = (
				await import(pathToFileURL(path.join(OPERATOR_SCHEMAS, f)))
			).validate;
}

function schemaFor(apiVersion, kind) {
	const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
	if (group === "monitoring.coreos.com" && /^v[0-9a-z]+$/.test(version))
		return (
			operator[`MonitoringCoreosCom${version[0].toUpperCase()}${version.slice(1)}${kind}`] ||
			null
		);
	const word = GROUPS[group];
	if (word === undefined || !/^v[0-9a-z]+$/.test(version) || !/^[A-Z][A-Za-z]+$/.test(kind))
		return null;
	const name = `IoK8sApi${word}${version[0].toUpperCase()}${version.slice(1)}${kind}`;
	try {
		return require(path.join(SCHEMAS, `${name}.js`)).validate;
	} catch (e) {
		return null;
	}
}

// A deep copy of value behind proxies that record the fields read; records lists every object.
function tracked(value, path, records) {
	if (value === null || typeof value !== "object") return value;
	const copy = Array.isArray(value)
		? value.map((v, i) => tracked(v, `${path}[${i}]`, records))
		: Object.fromEntries(
				Object.entries(value).map(([k, v]) => [k, tracked(v, `${path}.${k}`, records)])
			);
	if (Array.isArray(value)) return copy;
	const rec = { path, keys: Object.keys(value), read: new Set(), enumerated: false };
	records.push(rec);
	return new Proxy(copy, {
		get(t, k, r) {
			if (typeof k === "string") rec.read.add(k);
			return Reflect.get(t, k, r);
		},
		has(t, k) {
			rec.read.add(k);
			return Reflect.has(t, k);
		},
		getOwnPropertyDescriptor(t, k) {
			rec.read.add(k);
			return Reflect.getOwnPropertyDescriptor(t, k);
		},
		ownKeys(t) {
			rec.enumerated = true;
			return Reflect.ownKeys(t);
		},
	});
}

// ajv's compiled validators carry no message text: say it from the keyword.
function message(e) {
	const p = e.params || {};
	switch (e.keyword) {
	case "required":
		return `must have required property '${p.missingProperty}'`;
	case "type":
		return `must be ${p.type}`;
	case "enum":
		return `must be one of ${JSON.stringify(p.allowedValues)}`;
	case "format":
		return `must match format "${p.format}"`;
	default:
		return `fails ${e.keyword} ${JSON.stringify(p)}`;
	}
}

function podChecks(obj, err) {
	const spec = obj.spec || {};
	const tpl = obj.kind === "Pod" ? { spec } : spec.template;
	if (!tpl) return;
	const sel = (spec.selector && spec.selector.matchLabels) || {};
	const labels = (tpl.metadata && tpl.metadata.labels) || {};
	for (const [k, v] of Object.entries(sel))
		if (labels[k] !== v)
			err(`.spec.selector.matchLabels.${k}: "${v}" does not match the template's labels`);
	const pod = tpl.spec || {};
	const volumes = new Set();
	for (const v of pod.volumes || []) {
		if (volumes.has(v.name)) err(`.spec.template.spec.volumes: "${v.name}" is defined twice`);
		volumes.add(v.name);
	}
	const names = new Set();
	for (const [list, cs] of [["initContainers", pod.initContainers], ["containers", pod.containers]]) {
		(cs || []).forEach((c, i) => {
			const at = `.spec.template.spec.${list}[${i}]`;
			if (names.has(c.name)) err(`${at}.name: "${c.name}" is used twice`);
			names.add(c.name);
			for (const m of c.volumeMounts || [])
				if (!volumes.has(m.name))
					err(`${at}.volumeMounts: "${m.name}" is not a volume of the pod`);
			const ports = new Set((c.ports || []).map((p) => p.name).filter(Boolean));
			for (const probe of ["readinessProbe", "livenessProbe", "startupProbe"]) {
				const p = c[probe];
				const port = p && ((p.httpGet && p.httpGet.port) || (p.tcpSocket && p.tcpSocket.port));
				if (typeof port === "string" && !ports.has(port))
					err(`${at}.${probe}: port "${port}" is not a named port of the container`);
			}
		});
	}
}

// Errors in one file, each printed as "FILE: KIND/NAME: PATH: what"; the number of objects.
function checkFile(file) {
	const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"));
	let errors = 0;
	let objects = 0;
	for (const doc of docs) {
		if (doc.errors.length) {
			console.log(`${file}: YAML: ${doc.errors[0].message}`);
			errors++;
			continue;
		}
		const obj = doc.toJS();
		if (obj === null) continue;
		objects++;
		const name = `${obj.kind || "?"}/${(obj.metadata && obj.metadata.name) || "?"}`;
		const err = (msg) => {
			console.log(`${file}: ${name}: ${msg}`);
			errors++;
		};
		const validate = schemaFor(String(obj.apiVersion || ""), String(obj.kind || ""));
		if (!validate) {
			err(`no Kubernetes 1.33 schema for apiVersion "${obj.apiVersion}" kind "${obj.kind}"`);
			continue;
		}
		const records = [];
		const ok = validate(tracked(obj, "", records));
		if (!ok)
			for (const e of validate.errors || [])
				err(`${e.instancePath.replace(/\/([0-9]+)(?=\/|$)/g, "[$1]").replace(/\//g, ".") || "."}: ${message(e)}`);
		else
			for (const rec of records)
				if (!rec.enumerated)
					for (const k of rec.keys)
						if (!rec.read.has(k)) err(`${rec.path}.${k}: unknown field`);
		podChecks(obj, err);
	}
	if (objects === 0) {
		console.log(`${file}: no objects`);
		errors++;
	}
	if (!errors)
		console.log(`${file}: ${objects} objects valid (Kubernetes 1.33 schemas, kubernetes-models 4.5.1; the Prometheus Operator's, @kubernetes-models/prometheus-operator 5.0.1)`);
	return errors;
}

async function main() {
	const files = process.argv.slice(2);
	if (!files.length) {
		console.error("usage: validate.js FILE.yaml...");
		process.exit(2);
	}
	await loadOperatorSchemas();
	let bad = 0;
	for (const file of files) if (checkFile(file)) bad++;
	process.exit(bad ? 1 : 0);
}

main();
