// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* oci_bundle.c: a CRI container's config.json, parsed with jansson; see oci_bundle.h. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "oci_bundle.h"
#include "util.h"

#define ANN "io.kubernetes.cri."

/* obj[key] as a string into out: -EINVAL naming where.key when missing (and required), not a
 * string, empty, or too long; 0 and out "" when absent and optional.
 */
static int get_str(json_t *obj, const char *where, const char *key, bool required, char *out,
		   size_t outlen, const char *file, char *err, size_t errlen)
{
	json_t *v = json_object_get(obj, key);
	const char *s;
	size_t n;

	out[0] = '\0';
	if (!v) {
		if (!required)
			return 0;
		return rw_fail_msg(err, errlen, -EINVAL, "%s: %s%s: missing", file, where, key);
	}
	if (!json_is_string(v))
		return rw_fail_msg(err, errlen, -EINVAL, "%s: %s%s: not a string", file, where,
				   key);
	s = json_string_value(v);
	n = json_string_length(v);
	if (n == 0)
		return rw_fail_msg(err, errlen, -EINVAL, "%s: %s%s: empty", file, where, key);
	if (n >= outlen)
		return rw_fail_msg(err, errlen, -EINVAL, "%s: %s%s: longer than %zu bytes", file,
				   where, key, outlen - 1);
	memcpy(out, s, n + 1);
	return 0;
}

/* obj[key] as an object (or an array, want_array): NULL with err when missing or not one. */
static json_t *get_obj(json_t *obj, const char *where, const char *key, bool want_array,
		       const char *file, char *err, size_t errlen)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		rw_fail_msg(err, errlen, -EINVAL, "%s: %s%s: missing", file, where, key);
	else if (want_array ? !json_is_array(v) : !json_is_object(v))
		rw_fail_msg(err, errlen, -EINVAL, "%s: %s%s: not an %s", file, where, key,
			    want_array ? "array" : "object");
	else
		return v;
	return NULL;
}

/* A sandbox's network namespace: the linux.namespaces entry of type "network" (none: the host's
 * network, no path).
 */
static int netns_path(json_t *lx, struct rw_oci_bundle *b, const char *file, char *err,
		      size_t errlen)
{
	json_t *nss = json_object_get(lx, "namespaces"), *ns;
	char where[64], type[32];
	size_t i;
	int ret;

	if (!nss)
		return 0;
	if (!json_is_array(nss))
		return rw_fail_msg(err, errlen, -EINVAL, "%s: linux.namespaces: not an array",
				   file);
	json_array_foreach(nss, i, ns)
	{
		snprintf(where, sizeof(where), "linux.namespaces[%zu].", i);
		if (!json_is_object(ns))
			return rw_fail_msg(err, errlen, -EINVAL,
					   "%s: linux.namespaces[%zu]: not an object", file, i);
		ret = get_str(ns, where, "type", true, type, sizeof(type), file, err, errlen);
		if (ret)
			return ret;
		if (strcmp(type, "network"))
			continue;
		return get_str(ns, where, "path", false, b->netns, sizeof(b->netns), file, err,
			       errlen);
	}
	return 0;
}

/* The annotations read into struct rw_oci_bundle, each required of a container, and of a
 * sandbox when `sandbox`.
 */
#define ANN_FIELD(key, field, in_sandbox)                                      \
	{                                                                      \
		ANN key, offsetof(struct rw_oci_bundle, field),                \
			sizeof(((struct rw_oci_bundle *)0)->field), in_sandbox \
	}
static const struct ann_field {
	const char *key;
	size_t off, size;
	bool sandbox;
} ann_fields[] = {
	ANN_FIELD("container-name", name, false),     ANN_FIELD("sandbox-id", sandbox_id, true),
	ANN_FIELD("sandbox-uid", pod_uid, true),      ANN_FIELD("sandbox-name", pod_name, true),
	ANN_FIELD("sandbox-namespace", pod_ns, true),
};

int rw_oci_bundle_parse(const char *text, size_t len, const char *file, struct rw_oci_bundle *b,
			char *err, size_t errlen)
{
	static const char ann_where[] = "annotations.";
	json_error_t jerr;
	json_t *root, *ann, *lx;
	char type[16];
	int ret = -EINVAL;

	memset(b, 0, sizeof(*b));
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return rw_fail_msg(err, errlen, -EINVAL, "%s: line %d column %d: %s", file,
				   jerr.line, jerr.column, jerr.text);
	if (!json_is_object(root)) {
		rw_fail_msg(err, errlen, -EINVAL, "%s: not a JSON object", file);
		goto out;
	}
	ann = get_obj(root, "", "annotations", false, file, err, errlen);
	lx = ann ? get_obj(root, "", "linux", false, file, err, errlen) : NULL;
	if (!lx)
		goto out;
	ret = get_str(ann, ann_where, ANN "container-type", true, type, sizeof(type), file, err,
		      errlen);
	if (ret)
		goto out;
	if (!strcmp(type, "sandbox")) {
		b->sandbox = true;
	} else if (strcmp(type, "container")) {
		ret = rw_fail_msg(err, errlen, -EINVAL,
				  "%s: annotations." ANN "container-type: \"%s\", not \"sandbox\" "
				  "or \"container\"",
				  file, type);
		goto out;
	}
	for (size_t i = 0; !ret && i < sizeof(ann_fields) / sizeof(ann_fields[0]); i++) {
		const struct ann_field *f = &ann_fields[i];

		ret = get_str(ann, ann_where, f->key, !b->sandbox || f->sandbox, (char *)b + f->off,
			      f->size, file, err, errlen);
	}
	if (!ret)
		ret = get_str(lx, "linux.", "cgroupsPath", true, b->cgroups_path,
			      sizeof(b->cgroups_path), file, err, errlen);
	if (!ret && b->sandbox)
		ret = netns_path(lx, b, file, err, errlen);
	if (b->sandbox)
		b->name[0] = '\0';
out:
	json_decref(root);
	return ret;
}

int rw_oci_bundle_read(const char *path, struct rw_oci_bundle *b, char *err, size_t errlen)
{
	size_t len;
	char *text;
	int ret;

	ret = rw_read_file(path, RW_OCI_CONFIG_MAX, &text, &len);
	if (ret == -EFBIG)
		return rw_fail_msg(err, errlen, ret, "%s: larger than %u bytes, refused", path,
				   RW_OCI_CONFIG_MAX);
	if (ret)
		return rw_fail_msg(err, errlen, ret, "%s: %s", path, strerror(-ret));
	ret = rw_oci_bundle_parse(text, len, path, b, err, errlen);
	free(text);
	return ret;
}
