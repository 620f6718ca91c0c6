/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* install.c: runwall-cni install/uninstall (install.h). Every file is written whole to a
 * temporary name in the same folder and renamed over the old one, so a runtime reading the
 * conf folder at any moment sees the old or the new file, never half of one. The temporary
 * names end in ".tmp", an extension no runtime loads.
 */
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

#include "install.h"

static int fail(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return ret;
}

static bool is_ours(json_t *plugin)
{
	json_t *t = json_object_get(plugin, "type");

	return json_is_string(t) && !strcmp(json_string_value(t), RW_CNI_TYPE);
}

int rw_cni_conflist_edit(json_t *doc, json_t *entry, bool *changed, char *err, size_t errlen)
{
	json_t *plugins = json_object_get(doc, "plugins"), *p;
	bool placed = false;
	size_t i;

	*changed = false;
	if (!json_is_object(doc) || !json_is_array(plugins))
		return fail(err, errlen, -EINVAL, "not a conflist: no \"plugins\" array");
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

static int write_atomic(const char *dir, const char *name, const void *buf, size_t len, mode_t mode,
			char *err, size_t errlen)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (snprintf(tmp, sizeof(tmp), "%s/.%s.runwall.tmp", dir, name) >= (int)sizeof(tmp))
		return fail(err, errlen, -ENAMETOOLONG, "%s: name too long", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return fail(err, errlen, -errno, "%s: %s", tmp, strerror(errno));
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, (const char *)buf + off, len - off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = fail(err, errlen, -errno, "%s: %s", tmp, strerror(errno));
			break;
		}
		off += n;
	}
	if (!ret && fchmod(fd, mode))
		ret = fail(err, errlen, -errno, "%s: %s", tmp, strerror(errno));
	if (!ret && fsync(fd))
		ret = fail(err, errlen, -errno, "%s: %s", tmp, strerror(errno));
	close(fd);
	if (!ret && rename(tmp, path))
		ret = fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
	if (ret)
		unlink(tmp);
	return ret;
}

static int read_all(const char *path, char **out, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f)
		return fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
	for (;;) {
		if (n == cap) {
			char *grown = realloc(buf, cap ? cap * 2 : 1 << 16);

			if (!grown || cap > (256u << 20)) {
				free(grown ? grown : buf);
				fclose(f);
				return fail(err, errlen, -ENOMEM, "%s: too big", path);
			}
			buf = grown;
			cap = cap ? cap * 2 : 1 << 16;
		}
		size_t got = fread(buf + n, 1, cap - n, f);

		n += got;
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		free(buf);
		fclose(f);
		return fail(err, errlen, -EIO, "%s: read error", path);
	}
	fclose(f);
	*out = buf;
	*len = n;
	return 0;
}

static int conflist_filter(const struct dirent *de)
{
	size_t n = strlen(de->d_name);

	return de->d_name[0] != '.' && n > 9 && !strcmp(de->d_name + n - 9, ".conflist");
}

/* Apply rw_cni_conflist_edit() to one file, writing it only when it changes. */
static int edit_file(const char *dir, const char *name, json_t *entry, char *err, size_t errlen)
{
	char path[PATH_MAX], *text;
	json_error_t jerr;
	bool changed;
	json_t *doc;
	int ret;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!doc)
		return fail(err, errlen, -EINVAL, "%s:%d:%d: %s", path, jerr.line, jerr.column,
			    jerr.text);
	ret = rw_cni_conflist_edit(doc, entry, &changed, err, errlen);
	if (ret) {
		char msg[256];

		snprintf(msg, sizeof(msg), "%s", err);
		fail(err, errlen, ret, "%s: %s", path, msg);
	} else if (changed) {
		text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		if (!text) {
			ret = fail(err, errlen, -ENOMEM, "%s: cannot encode", path);
		} else {
			size_t len = strlen(text);

			text[len] = '\n'; /* json_dumps leaves room for its NUL: reuse it */
			ret = write_atomic(dir, name, text, len + 1, 0644, err, errlen);
			free(text);
		}
	}
	json_decref(doc);
	return ret;
}

int rw_cni_install(const char *self, const char *bin_dir, const char *conf_dir, json_t *entry,
		   char *err, size_t errlen)
{
	struct dirent **names = NULL;
	char *bin = NULL;
	size_t len = 0;
	int n, ret;

	n = scandir(conf_dir, &names, conflist_filter, alphasort);
	if (n < 0)
		return fail(err, errlen, -errno, "%s: %s", conf_dir, strerror(errno));
	if (n == 0) {
		free(names);
		return fail(
			err, errlen, -ENOENT,
			"%s: no *.conflist: runwall-cni chains after the node's network plugin, "
			"whose conflist must be there first",
			conf_dir);
	}
	/* The binary first: a conflist naming a plugin the runtime cannot find fails every
	 * pod, while a binary no conflist names is harmless.
	 */
	ret = read_all(self, &bin, &len, err, errlen);
	if (!ret)
		ret = write_atomic(bin_dir, RW_CNI_TYPE, bin, len, 0755, err, errlen);
	free(bin);
	/* The runtime uses the first conflist in lexical order (libcni's ConfFiles, sorted). */
	if (!ret)
		ret = edit_file(conf_dir, names[0]->d_name, entry, err, errlen);
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return ret;
}

int rw_cni_uninstall(const char *bin_dir, const char *conf_dir, char *err, size_t errlen)
{
	struct dirent **names = NULL;
	char path[PATH_MAX];
	int n, ret = 0;

	n = scandir(conf_dir, &names, conflist_filter, alphasort);
	if (n < 0 && errno != ENOENT)
		return fail(err, errlen, -errno, "%s: %s", conf_dir, strerror(errno));
	/* Every conflist, not only the first: one that became first since install too. The
	 * entries go before the binary, for the reason install writes the binary first.
	 */
	for (int i = 0; i < n; i++) {
		if (!ret)
			ret = edit_file(conf_dir, names[i]->d_name, NULL, err, errlen);
		free(names[i]);
	}
	free(names);
	if (ret)
		return ret;
	snprintf(path, sizeof(path), "%s/%s", bin_dir, RW_CNI_TYPE);
	if (unlink(path) && errno != ENOENT)
		return fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
	return 0;
}
