/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* cnichain.c: runwall-cni's entry in the node's CNI configuration (cnichain.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "cnichain.h"
#include "util.h"

static bool is_ours(json_t *plugin)
{
	json_t *t = json_object_get(plugin, "type");

	return json_is_string(t) && !strcmp(json_string_value(t), RW_CNI_TYPE);
}

static bool has_ours(json_t *doc)
{
	json_t *plugins = json_object_get(doc, "plugins"), *p;
	size_t i;

	json_array_foreach(plugins, i, p) if (is_ours(p)) return true;
	return false;
}

int rw_cni_conflist_edit(json_t *doc, json_t *entry, bool *changed, char *err, size_t errlen)
{
	json_t *plugins = json_object_get(doc, "plugins"), *p;
	bool placed = false;
	size_t i;

	*changed = false;
	if (!json_is_object(doc) || !json_is_array(plugins))
		return rw_fail_msg(err, errlen, -EINVAL, "not a conflist: no \"plugins\" array");
	for (i = 0; i < json_array_size(plugins);) {
		p = json_array_get(plugins, i);
		if (!is_ours(p)) {
			i++;
			continue;
		}
		if (entry && !placed) {
			if (!json_equal(p, entry)) {
				json_array_set(plugins, i, entry);
				*changed = true;
			}
			placed = true;
			i++;
			continue;
		}
		json_array_remove(plugins, i); /* uninstall, or a duplicate */
		*changed = true;
	}
	if (entry && !placed) {
		json_array_append(plugins, entry);
		*changed = true;
	}
	return 0;
}

int rw_cni_write_atomic(const char *dir, const char *name, const void *buf, size_t len,
			unsigned int mode, char *err, size_t errlen)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (snprintf(tmp, sizeof(tmp), "%s/.%s.runwall.tmp", dir, name) >= (int)sizeof(tmp))
		return rw_fail_msg(err, errlen, -ENAMETOOLONG, "%s: name too long", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return rw_fail_msg(err, errlen, -errno, "%s: %s", tmp, strerror(errno));
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, (const char *)buf + off, len - off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = rw_fail_msg(err, errlen, -errno, "%s: %s", tmp, strerror(errno));
			break;
		}
		off += n;
	}
	if (!ret && fchmod(fd, mode))
		ret = rw_fail_msg(err, errlen, -errno, "%s: %s", tmp, strerror(errno));
	if (!ret && fsync(fd))
		ret = rw_fail_msg(err, errlen, -errno, "%s: %s", tmp, strerror(errno));
	close(fd);
	if (!ret && rename(tmp, path))
		ret = rw_fail_msg(err, errlen, -errno, "%s: %s", path, strerror(errno));
	if (ret)
		unlink(tmp);
	return ret;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n > m && !strcmp(s + n - m, suffix);
}

bool rw_cni_is_conflist(const char *name)
{
	return ends_with(name, ".conflist");
}

/* libcni's ConfFiles(dir, [".conf", ".conflist", ".json"]): what the runtime considers. */
static int conf_filter(const struct dirent *de)
{
	return de->d_name[0] != '.' &&
	       (ends_with(de->d_name, ".conf") || ends_with(de->d_name, ".conflist") ||
		ends_with(de->d_name, ".json"));
}

int rw_cni_conf_pick(const char *conf_dir, char *name, size_t namelen, char *err, size_t errlen)
{
	struct dirent **names = NULL;
	int n, ret = 0;

	n = scandir(conf_dir, &names, conf_filter, alphasort);
	if (n < 0)
		return rw_fail_msg(err, errlen, -errno, "%s: %s", conf_dir, strerror(errno));
	if (n == 0)
		ret = rw_fail_msg(
			err, errlen, -ENOENT,
			"%s: no .conf, .conflist or .json: the node's network plugin has not "
			"written its configuration",
			conf_dir);
	else if ((size_t)snprintf(name, namelen, "%s", names[0]->d_name) >= namelen)
		ret = rw_fail_msg(err, errlen, -ENAMETOOLONG, "%s/%s: name too long", conf_dir,
				  names[0]->d_name);
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return ret;
}

int rw_cni_conf_edit_file(const char *conf_dir, const char *name, json_t *entry, bool keep_existing,
			  bool *changed, char *err, size_t errlen)
{
	char path[PATH_MAX], *text;
	json_error_t jerr;
	bool edited = false;
	json_t *doc;
	int ret;

	if (changed)
		*changed = false;
	snprintf(path, sizeof(path), "%s/%s", conf_dir, name);
	doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!doc)
		return rw_fail_msg(err, errlen, -EINVAL, "%s:%d:%d: %s", path, jerr.line,
				   jerr.column, jerr.text);
	if (keep_existing && entry && has_ours(doc)) {
		json_decref(doc);
		return 0;
	}
	ret = rw_cni_conflist_edit(doc, entry, &edited, err, errlen);
	if (ret) {
		char msg[256];

		snprintf(msg, sizeof(msg), "%s", err);
		rw_fail_msg(err, errlen, ret, "%s: %s", path, msg);
	} else if (edited) {
		text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		if (!text) {
			ret = rw_fail_msg(err, errlen, -ENOMEM, "%s: cannot encode", path);
		} else {
			size_t len = strlen(text);

			text[len] = '\n'; /* json_dumps leaves room for its NUL: reuse it */
			ret = rw_cni_write_atomic(conf_dir, name, text, len + 1, 0644, err, errlen);
			free(text);
			if (!ret && changed)
				*changed = true;
		}
	}
	json_decref(doc);
	return ret;
}

int rw_cni_chain_ensure(const char *conf_dir, json_t *entry, struct rw_cni_chain *st)
{
	int ret;

	memset(st, 0, sizeof(*st));
	ret = rw_cni_conf_pick(conf_dir, st->file, sizeof(st->file), st->why, sizeof(st->why));
	if (ret) {
		st->file[0] = '\0';
		return ret;
	}
	if (!rw_cni_is_conflist(st->file)) {
		snprintf(st->why, sizeof(st->why),
			 "%s/%s is loaded first and holds one plugin, not a list: runwall-cni "
			 "chains only into a .conflist",
			 conf_dir, st->file);
		return -EMEDIUMTYPE;
	}
	ret = rw_cni_conf_edit_file(conf_dir, st->file, entry, true, &st->repaired, st->why,
				    sizeof(st->why));
	if (ret)
		return ret;
	st->chained = true;
	return 0;
}
