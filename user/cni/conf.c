/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* conf.c: runwall-cni's network configuration and prevResult, parsed with jansson (conf.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "conf.h"
#include "datapath.h"
#include "netlink.h"
#include "podaddr.h"
#include "util.h"

static const char *const versions[] = {RW_CNI_VERSIONS};

bool rw_cni_version_ok(const char *v)
{
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		if (!strcmp(v, versions[i]))
			return true;
	return false;
}

bool rw_cni_version_has_check(const char *v)
{
	return rw_cni_version_ok(v) && strcmp(v, "0.3.0") && strcmp(v, "0.3.1");
}

/* An optional string key of at most size-1 bytes; 0, or an error code with err set. */
static int opt_string(json_t *conf, const char *key, char *out, size_t size, char *err,
		      size_t errlen)
{
	json_t *v = json_object_get(conf, key);

	if (!v)
		return 0;
	if (!json_is_string(v))
		return rw_fail_msg(err, errlen, RW_CNI_E_CONFIG, "%s: must be a string", key);
	if (json_string_length(v) == 0 || json_string_length(v) >= size ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return rw_fail_msg(err, errlen, RW_CNI_E_CONFIG,
				   "%s: must be a non-empty string of at most %zu bytes", key,
				   size - 1);
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

/* The host-side interface and the pod's IPv4 address in a prevResult (spec "Success": the
 * interfaces the plugins before us created, host side without "sandbox"; ips[] pointing at the
 * container's). Sets req->prev_error when something is missing.
 */
static void parse_prev(struct rw_cni_req *req)
{
	json_t *ifs = json_object_get(req->prev, "interfaces");
	json_t *ips = json_object_get(req->prev, "ips");
	size_t i, n_host = 0;
	json_t *it;

	if (!json_is_array(ifs)) {
		snprintf(req->prev_error, sizeof(req->prev_error),
			 "prevResult.interfaces: missing or not an array");
		return;
	}
	json_array_foreach(ifs, i, it)
	{
		json_t *name = json_object_get(it, "name"), *sbx = json_object_get(it, "sandbox");

		if (!json_is_object(it) || !json_is_string(name)) {
			snprintf(req->prev_error, sizeof(req->prev_error),
				 "prevResult.interfaces[%zu]: not an object with a name", i);
			return;
		}
		if (sbx && !(json_is_string(sbx) && json_string_length(sbx) == 0))
			continue;
		if (json_string_length(name) == 0 ||
		    json_string_length(name) >= sizeof(req->host_if) ||
		    strlen(json_string_value(name)) != json_string_length(name) ||
		    strchr(json_string_value(name), '/')) {
			snprintf(req->prev_error, sizeof(req->prev_error),
				 "prevResult.interfaces[%zu].name: not an interface name", i);
			return;
		}
		/* Several host-side interfaces (a bridge and a veth): the one the node's agent
		 * watches (ifPrefix) is the sandbox's; otherwise the first.
		 */
		if (n_host++ && (rw_ifname_match(req->host_if, req->ifprefix) ||
				 !rw_ifname_match(json_string_value(name), req->ifprefix)))
			continue;
		snprintf(req->host_if, sizeof(req->host_if), "%s", json_string_value(name));
	}
	if (!n_host) {
		snprintf(req->prev_error, sizeof(req->prev_error),
			 "prevResult.interfaces: no host-side interface (one without \"sandbox\")");
		return;
	}
	if (!json_is_array(ips)) {
		snprintf(req->prev_error, sizeof(req->prev_error),
			 "prevResult.ips: missing or not an array");
		return;
	}
	json_array_foreach(ips, i, it)
	{
		json_t *addr = json_object_get(it, "address");
		const char *text;
		char why[128];
		__be32 pod, pod6[4];
		int err;

		if (!json_is_object(it) || !json_is_string(addr)) {
			snprintf(req->prev_error, sizeof(req->prev_error),
				 "prevResult.ips[%zu].address: missing or not a string", i);
			return;
		}
		text = json_string_value(addr);
		/* One address of each family is the pod's, each bound and anti-spoofed; one that
		 * no pod can have is refused, never bound. A second of a family could not be bound
		 * (a veth binds one of each): refused rather than left to be dropped as spoofed.
		 */
		err = rw_pod_cidr_check(text, &pod, why, sizeof(why));
		if (err == -EAFNOSUPPORT) {
			err = rw_pod_cidr6_check(text, pod6, why, sizeof(why));
			if (err == -EAFNOSUPPORT) {
				snprintf(req->prev_error, sizeof(req->prev_error),
					 "prevResult.ips[%zu].address: \"%.40s\" is not an IPv4 or "
					 "IPv6 address",
					 i, text);
				return;
			}
			if (!err && req->has_ip6) {
				snprintf(
					req->prev_error, sizeof(req->prev_error),
					"prevResult.ips[%zu].address: \"%.40s\" is a second IPv6 "
					"address (ips[%zu] is the pod's): a veth binds one of each "
					"family",
					i, text, req->ip6_index);
				return;
			}
		} else if (!err && req->has_ip4) {
			snprintf(req->prev_error, sizeof(req->prev_error),
				 "prevResult.ips[%zu].address: \"%.40s\" is a second IPv4 address "
				 "(ips[%zu] is the pod's): a veth binds one of each family",
				 i, text, req->ip4_index);
			return;
		} else if (!err) {
			req->has_ip4 = true;
			req->ip4_index = i;
			req->pod_ip = pod;
			continue;
		}
		if (err) {
			snprintf(req->prev_error, sizeof(req->prev_error),
				 "prevResult.ips[%zu].address: \"%.40s\" is not a pod address: %s",
				 i, text, why);
			return;
		}
		req->has_ip6 = true;
		req->ip6_index = i;
		memcpy(req->pod_ip6, pod6, sizeof(req->pod_ip6));
	}
	if (!req->has_ip4 && !req->has_ip6) {
		snprintf(req->prev_error, sizeof(req->prev_error),
			 "prevResult.ips: no IPv4 or IPv6 address");
		return;
	}
	req->prev_complete = true;
}

int rw_cni_parse(const char *buf, size_t len, struct rw_cni_req *req, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *conf, *v;
	char mode[8] = "auto";
	int code;

	memset(req, 0, sizeof(*req));
	snprintf(req->bpffs, sizeof(req->bpffs), "%s", RW_DEFAULT_BPFFS);
	snprintf(req->ifprefix, sizeof(req->ifprefix), "%s", RW_CNI_DEFAULT_IFPREFIX);
	req->mode = RW_ATTACH_AUTO;

	conf = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!conf)
		return rw_fail_msg(err, errlen, RW_CNI_E_DECODE,
				   "network config: line %d column %d: %s", jerr.line, jerr.column,
				   jerr.text);
	if (!json_is_object(conf)) {
		code = rw_fail_msg(err, errlen, RW_CNI_E_DECODE,
				   "network config: not a JSON object");
		goto out;
	}
	v = json_object_get(conf, "cniVersion");
	if (!json_is_string(v)) {
		code = rw_fail_msg(err, errlen, RW_CNI_E_CONFIG,
				   "cniVersion: missing or not a string");
		goto out;
	}
	if (!rw_cni_version_ok(json_string_value(v))) {
		code = rw_fail_msg(err, errlen, RW_CNI_E_VERSION,
				   "cniVersion: \"%.32s\" is not one of 0.3.0, 0.3.1, 0.4.0, 1.0.0",
				   json_string_value(v));
		goto out;
	}
	snprintf(req->cni_version, sizeof(req->cni_version), "%s", json_string_value(v));
	v = json_object_get(conf, "type");
	if (!json_is_string(v)) {
		code = rw_fail_msg(err, errlen, RW_CNI_E_CONFIG, "type: missing or not a string");
		goto out;
	}
	code = opt_string(conf, "bpffs", req->bpffs, sizeof(req->bpffs), err, errlen);
	if (!code)
		code = opt_string(conf, "ifPrefix", req->ifprefix, sizeof(req->ifprefix), err,
				  errlen);
	if (!code)
		code = opt_string(conf, "attachMode", mode, sizeof(mode), err, errlen);
	if (code)
		goto out;
	if (req->bpffs[0] != '/') {
		code = rw_fail_msg(err, errlen, RW_CNI_E_CONFIG,
				   "bpffs: \"%s\" is not an absolute path", req->bpffs);
		goto out;
	}
	if (!strcmp(mode, "auto")) {
		req->mode = RW_ATTACH_AUTO;
	} else if (!strcmp(mode, "tcx")) {
		req->mode = RW_ATTACH_TCX;
	} else if (!strcmp(mode, "tc")) {
		req->mode = RW_ATTACH_TC;
	} else {
		code = rw_fail_msg(err, errlen, RW_CNI_E_CONFIG,
				   "attachMode: \"%s\" is not one of auto, tcx, tc", mode);
		goto out;
	}
	v = json_object_get(conf, "prevResult");
	if (v && !json_is_null(v)) {
		if (!json_is_object(v)) {
			code = rw_fail_msg(err, errlen, RW_CNI_E_CONFIG,
					   "prevResult: not an object");
			goto out;
		}
		req->prev = json_incref(v);
		parse_prev(req);
	}
	code = 0;
out:
	json_decref(conf);
	if (code)
		rw_cni_req_free(req);
	return code;
}

void rw_cni_req_free(struct rw_cni_req *req)
{
	json_decref(req->prev);
	req->prev = NULL;
}
