// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* pw_msg.c: PolicyWatch messages: the framing of the stream into lines, and each line's
 * envelope (type, revision, base). The snapshot or run inside is left to the policy parser.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pw_msg.h"

#define MAX_REVISION ((1ULL << 56) - 1)

static const char *const type_names[] = {
	[RW_WATCH_SNAPSHOT] = "snapshot",     [RW_WATCH_RUN_UPSERT] = "run-upsert",
	[RW_WATCH_RUN_DELETE] = "run-delete", [RW_WATCH_HEARTBEAT] = "heartbeat",
	[RW_WATCH_STAGED] = "staged",	      [RW_WATCH_UNSTAGE] = "unstage",
};

/* The keys each type requires besides "type". */
static const char *const type_keys[][3] = {
	[RW_WATCH_SNAPSHOT] = {"snapshot"},
	[RW_WATCH_RUN_UPSERT] = {"revision", "base", "run"},
	[RW_WATCH_RUN_DELETE] = {"revision", "base", "id"},
	[RW_WATCH_HEARTBEAT] = {NULL},
	[RW_WATCH_STAGED] = {NULL},
	[RW_WATCH_UNSTAGE] = {NULL},
};

/* The keys a type takes one of (staged: a snapshot, or a run). */
static const char *const type_one_of[][2] = {
	[RW_WATCH_STAGED] = {"snapshot", "run"},
};

static int get_revision(json_t *root, const char *key, bool zero_ok, uint64_t *out, char *err,
			size_t errlen)
{
	json_t *v = json_object_get(root, key);
	json_int_t r;

	if (!json_is_integer(v)) {
		snprintf(err, errlen, "%s: expected an integer", key);
		return -EINVAL;
	}
	r = json_integer_value(v);
	if (r < (zero_ok ? 0 : 1) || (unsigned long long)r > MAX_REVISION) {
		snprintf(err, errlen, "%s: %" JSON_INTEGER_FORMAT " is not a revision (%d..%llu)",
			 key, r, zero_ok ? 0 : 1, MAX_REVISION);
		return -EINVAL;
	}
	*out = r;
	return 0;
}

static bool valid_run_id(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n >= RW_RUN_ID_LEN)
		return false;
	for (const char *c = s; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-'))
			return false;
	return true;
}

int rw_pw_msg_parse(const char *buf, size_t len, struct rw_pw_msg *m, char *err, size_t errlen)
{
	json_error_t jerr;
	const char *key, *type;
	json_t *v;
	int t = -1;

	memset(m, 0, sizeof(*m));
	if (len > RW_WATCH_MAX_MSG) {
		snprintf(err, errlen, "(message): %zu bytes, more than %u", len, RW_WATCH_MAX_MSG);
		return -EINVAL;
	}
	m->root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!m->root) {
		snprintf(err, errlen, "(message): column %d: %s", jerr.column, jerr.text);
		for (char *c = err; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				*c = '?';
		return -EINVAL;
	}
	if (!json_is_object(m->root)) {
		snprintf(err, errlen, "(message): expected an object");
		goto bad;
	}
	type = json_string_value(json_object_get(m->root, "type"));
	if (!type) {
		snprintf(err, errlen, "type: missing, or not a string");
		goto bad;
	}
	for (size_t i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++)
		if (!strcmp(type, type_names[i]))
			t = i;
	if (t < 0) {
		snprintf(err, errlen,
			 "type: unknown type (expected snapshot, run-upsert, run-delete, "
			 "heartbeat, staged or unstage)");
		goto bad;
	}
	m->type = t;
	json_object_foreach(m->root, key, v)
	{
		bool known = !strcmp(key, "type");

		for (int k = 0; k < 3 && type_keys[t][k]; k++)
			known |= !strcmp(key, type_keys[t][k]);
		for (int k = 0; k < 2 && t == RW_WATCH_STAGED; k++)
			known |= !strcmp(key, type_one_of[t][k]);
		if (!known) {
			snprintf(err, errlen, "%.64s: unknown key in a %s message", key, type);
			goto bad;
		}
	}
	for (int k = 0; k < 3 && type_keys[t][k]; k++)
		if (!json_object_get(m->root, type_keys[t][k])) {
			snprintf(err, errlen, "%s: missing in a %s message", type_keys[t][k], type);
			goto bad;
		}
	switch (m->type) {
	case RW_WATCH_SNAPSHOT:
		m->body = json_object_get(m->root, "snapshot");
		if (!json_is_object(m->body)) {
			snprintf(err, errlen, "snapshot: expected an object");
			goto bad;
		}
		break;
	case RW_WATCH_RUN_UPSERT:
	case RW_WATCH_RUN_DELETE:
		if (get_revision(m->root, "revision", false, &m->revision, err, errlen) ||
		    get_revision(m->root, "base", true, &m->base, err, errlen))
			goto bad;
		if (m->type == RW_WATCH_RUN_UPSERT) {
			m->body = json_object_get(m->root, "run");
			if (!json_is_object(m->body)) {
				snprintf(err, errlen, "run: expected an object");
				goto bad;
			}
			/* The run's id is the policy parser's to check; it names the run here. */
			v = json_object_get(m->body, "id");
			if (json_is_string(v) && valid_run_id(json_string_value(v)))
				snprintf(m->id, sizeof(m->id), "%s", json_string_value(v));
		} else {
			v = json_object_get(m->root, "id");
			if (!json_is_string(v) || !valid_run_id(json_string_value(v))) {
				snprintf(err, errlen,
					 "id: expected a run id (1-%d of [A-Za-z0-9._-])",
					 RW_RUN_ID_LEN - 1);
				goto bad;
			}
			snprintf(m->id, sizeof(m->id), "%s", json_string_value(v));
		}
		break;
	case RW_WATCH_STAGED:
		m->body = json_object_get(m->root, "snapshot");
		m->run_staged = !m->body;
		if (m->run_staged)
			m->body = json_object_get(m->root, "run");
		if (!m->body || (!m->run_staged && json_object_get(m->root, "run"))) {
			snprintf(err, errlen,
				 "snapshot: a staged message carries a snapshot or a run, one "
				 "of them");
			goto bad;
		}
		if (!json_is_object(m->body)) {
			snprintf(err, errlen, "%s: expected an object",
				 m->run_staged ? "run" : "snapshot");
			goto bad;
		}
		v = json_object_get(m->body, "id");
		if (m->run_staged && json_is_string(v) && valid_run_id(json_string_value(v)))
			snprintf(m->id, sizeof(m->id), "%s", json_string_value(v));
		break;
	case RW_WATCH_HEARTBEAT:
	case RW_WATCH_UNSTAGE:
		break;
	}
	return 0;
bad:
	rw_pw_msg_free(m);
	return -EINVAL;
}

void rw_pw_msg_free(struct rw_pw_msg *m)
{
	json_decref(m->root);
	memset(m, 0, sizeof(*m));
}

int rw_pw_feed(struct rw_pw_framer *f, const char *data, size_t n, rw_pw_line_fn fn, void *ctx)
{
	while (n) {
		const char *nl = memchr(data, '\n', n);
		size_t take = nl ? (size_t)(nl - data) : n;
		int ret;

		if (f->len + take > f->max)
			return -EMSGSIZE;
		if (f->len + take > f->cap) {
			size_t cap = f->cap ? f->cap : 4096;
			char *b;

			while (cap < f->len + take)
				cap *= 2;
			if (cap > f->max)
				cap = f->max;
			b = realloc(f->buf, cap);
			if (!b)
				return -ENOMEM;
			f->buf = b;
			f->cap = cap;
		}
		if (take)
			memcpy(f->buf + f->len, data, take);
		f->len += take;
		data += take;
		n -= take;
		if (!nl)
			break;
		data++; /* the newline */
		n--;
		/* A carriage return before the newline is part of the line ending. */
		if (f->len && f->buf[f->len - 1] == '\r')
			f->len--;
		if (f->len) {
			ret = fn(ctx, f->buf, f->len);
			f->len = 0;
			if (ret)
				return ret;
		}
	}
	return 0;
}

void rw_pw_framer_reset(struct rw_pw_framer *f)
{
	f->len = 0;
}

void rw_pw_framer_free(struct rw_pw_framer *f)
{
	free(f->buf);
	f->buf = NULL;
	f->len = f->cap = 0;
}

bool rw_pw_error_path(const char *text, char *path, size_t pathlen, const char **msg)
{
	const char *p = strchr(text, ':'), *end;

	if (!p)
		return false;
	p++;
	/* an optional LINE:COL: */
	for (int field = 0; field < 2; field++) {
		const char *q = p;

		while (*q >= '0' && *q <= '9')
			q++;
		if (q == p || *q != ':')
			break;
		p = q + 1;
	}
	if (*p != ' ')
		return false;
	p++;
	end = strstr(p, ": ");
	if (!end || end == p)
		return false;
	snprintf(path, pathlen, "%.*s", (int)(end - p), p);
	*msg = end + 2;
	return true;
}
