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
#include "util.h"

static int read_all(const char *path, char **out, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f)
		return rw_fail_msg(err, errlen, -errno, "%s: %s", path, strerror(errno));
	for (;;) {
		if (n == cap) {
			char *grown = realloc(buf, cap ? cap * 2 : 1 << 16);

			if (!grown || cap > (256u << 20)) {
				free(grown ? grown : buf);
				fclose(f);
				return rw_fail_msg(err, errlen, -ENOMEM, "%s: too big", path);
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
		return rw_fail_msg(err, errlen, -EIO, "%s: read error", path);
	}
	fclose(f);
	*out = buf;
	*len = n;
	return 0;
}

/* Uninstall looks at every conflist, whichever is loaded. */
static int conflist_filter(const struct dirent *de)
{
	return de->d_name[0] != '.' && rw_cni_is_conflist(de->d_name);
}

int rw_cni_install(const char *self, const char *bin_dir, const char *conf_dir, json_t *entry,
		   char *err, size_t errlen)
{
	char name[256], *bin = NULL;
	size_t len = 0;
	int ret;

	/* The file the runtime loads (.conf, .conflist and .json, in lexical order). */
	ret = rw_cni_conf_pick(conf_dir, name, sizeof(name), err, errlen);
	if (ret == -ENOENT)
		return rw_fail_msg(
			err, errlen, -ENOENT,
			"%s: no *.conflist: runwall-cni chains after the node's network plugin, "
			"whose conflist must be there first",
			conf_dir);
	if (ret)
		return ret;
	if (!rw_cni_is_conflist(name))
		return rw_fail_msg(
			err, errlen, -EMEDIUMTYPE,
			"%s/%s is the file the runtime loads, and it holds one plugin, not a "
			"list: runwall-cni chains only into a .conflist",
			conf_dir, name);
	/* The binary first: a conflist naming a plugin the runtime cannot find fails every
	 * pod, while a binary no conflist names is harmless.
	 */
	ret = read_all(self, &bin, &len, err, errlen);
	if (!ret)
		ret = rw_cni_write_atomic(bin_dir, RW_CNI_TYPE, bin, len, 0755, err, errlen);
	free(bin);
	if (!ret)
		ret = rw_cni_conf_edit_file(conf_dir, name, entry, false, NULL, err, errlen);
	return ret;
}

int rw_cni_uninstall(const char *bin_dir, const char *conf_dir, char *err, size_t errlen)
{
	struct dirent **names = NULL;
	char path[PATH_MAX];
	int n, ret = 0;

	n = scandir(conf_dir, &names, conflist_filter, alphasort);
	if (n < 0 && errno != ENOENT)
		return rw_fail_msg(err, errlen, -errno, "%s: %s", conf_dir, strerror(errno));
	/* Every conflist, not only the first: one that became first since install too. The
	 * entries go before the binary, for the reason install writes the binary first.
	 */
	for (int i = 0; i < n; i++) {
		if (!ret)
			ret = rw_cni_conf_edit_file(conf_dir, names[i]->d_name, NULL, false, NULL,
						    err, errlen);
		free(names[i]);
	}
	free(names);
	if (ret)
		return ret;
	snprintf(path, sizeof(path), "%s/%s", bin_dir, RW_CNI_TYPE);
	if (unlink(path) && errno != ENOENT)
		return rw_fail_msg(err, errlen, -errno, "%s: %s", path, strerror(errno));
	return 0;
}
