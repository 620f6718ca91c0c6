// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cgroup2.c: the cgroup v2 mount, a container's directory from its OCI cgroupsPath, a directory's
 * cgroup id; see cgroup2.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <stdbool.h>
#include <string.h>
#include "cgroup2.h"
#include "util.h"

/* A mountinfo field with its octal escapes (\040 for a blank) undone, in place. */
static void unescape(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*w++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*w++ = *s;
		}
	}
	*w = '\0';
}

int rw_cgroup2_mount(const char *mountinfo, char *out, size_t outlen, char *err, size_t errlen)
{
	const char *path = mountinfo ? mountinfo : "/proc/self/mountinfo";
	char *line = NULL;
	size_t cap = 0;
	int ret = -ENOENT;
	FILE *f;

	f = fopen(path, "re");
	if (!f)
		return rw_fail_msg(err, errlen, -errno, "%s: %s", path, strerror(errno));
	/* "36 25 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw": the mount point is the
	 * fifth field, the file system type the first after the "-".
	 */
	while (ret == -ENOENT && getline(&line, &cap, f) > 0) {
		char *save = NULL, *mnt = NULL, *tok;
		bool dash = false;
		int field = 0;

		for (tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
			field++;
			if (field == 5)
				mnt = tok;
			else if (dash) {
				if (!strcmp(tok, "cgroup2") && mnt) {
					unescape(mnt);
					if (strlen(mnt) >= outlen)
						ret = rw_fail_msg(err, errlen, -ENAMETOOLONG,
								  "%s: the cgroup2 mount point is "
								  "too long",
								  path);
					else
						ret = 0, strcpy(out, mnt);
				}
				break;
			} else if (field > 5 && !strcmp(tok, "-"))
				dash = true;
		}
	}
	free(line);
	fclose(f);
	if (ret == -ENOENT)
		rw_fail_msg(err, errlen, ret, "%s: no cgroup2 file system is mounted", path);
	return ret;
}

static bool is_cgroup2(const char *dir)
{
	struct statfs sfs;

	return !statfs(dir, &sfs) && sfs.f_type == CGROUP2_SUPER_MAGIC;
}

int rw_cgroup2_root(const char *dir, char *out, size_t outlen, char *err, size_t errlen)
{
	struct statfs sfs;
	char unified[PATH_MAX];

	if (strlen(dir) >= PATH_MAX / 2)
		return rw_fail_msg(err, errlen, -ENAMETOOLONG, "%s: too long", dir);
	if (statfs(dir, &sfs))
		return rw_fail_msg(err, errlen, -errno, "%s: %s", dir, strerror(errno));
	snprintf(unified, sizeof(unified), "%s/unified", dir);
	if (sfs.f_type != CGROUP2_SUPER_MAGIC && !is_cgroup2(unified))
		return rw_fail_msg(err, errlen, -EINVAL,
				   "%s: not a cgroup v2 file system, nor is %s", dir, unified);
	if (snprintf(out, outlen, "%s", sfs.f_type == CGROUP2_SUPER_MAGIC ? dir : unified) >=
	    (int)outlen)
		return rw_fail_msg(err, errlen, -ENAMETOOLONG, "%s: too long", dir);
	return 0;
}

/* Append to out at *len: fails with -ENAMETOOLONG past outlen. */
static int put(char *out, size_t outlen, size_t *len, const char *s, size_t n)
{
	if (*len + n >= outlen)
		return -ENAMETOOLONG;
	memcpy(out + *len, s, n);
	*len += n;
	out[*len] = '\0';
	return 0;
}

static bool is_dot(const char *s, size_t n)
{
	return (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.');
}

/* The systemd driver: "SLICE:PREFIX:NAME" (runc's ExpandSlice() and getUnitName()). */
static int systemd_dir(const char *cp, char *out, size_t outlen, char *err, size_t errlen)
{
	const char *c1 = strchr(cp, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
	const char *slice = cp, *prefix, *name;
	size_t slen, plen, nlen, len = 0;
	int ret = 0;

	if (!c2 || strchr(c2 + 1, ':'))
		return rw_fail_msg(err, errlen, -EINVAL,
				   "cgroupsPath \"%s\": neither an absolute path (cgroupfs) nor "
				   "SLICE:PREFIX:NAME (systemd)",
				   cp);
	slen = (size_t)(c1 - cp);
	prefix = c1 + 1;
	plen = (size_t)(c2 - prefix);
	name = c2 + 1;
	nlen = strlen(name);
	if (slen == 0) {
		slice = "system.slice"; /* runc's default */
		slen = strlen(slice);
	}
	if (memchr(slice, '/', slen) || memchr(prefix, '/', plen) || strchr(name, '/'))
		return rw_fail_msg(err, errlen, -EINVAL,
				   "cgroupsPath \"%s\": a '/' in a systemd unit name", cp);
	if (nlen == 0 || is_dot(name, nlen) || is_dot(prefix, plen))
		return rw_fail_msg(err, errlen, -EINVAL,
				   "cgroupsPath \"%s\": the unit name is empty, \".\" or \"..\"",
				   cp);
	if (slen < 6 || memcmp(slice + slen - 6, ".slice", 6))
		return rw_fail_msg(err, errlen, -EINVAL,
				   "cgroupsPath \"%s\": the slice does not end in .slice", cp);
	slen -= 6;
	out[0] = '\0';
	/* "-.slice" is the root slice; a-b-c.slice is a.slice/a-b.slice/a-b-c.slice. */
	if (!(slen == 1 && slice[0] == '-')) {
		for (size_t i = 0; i <= slen && !ret; i++) {
			if (i < slen && slice[i] != '-')
				continue;
			/* A part ends at i: it must not be empty ("--", or a dash at an end). */
			if (i == 0 || slice[i - 1] == '-')
				return rw_fail_msg(
					err, errlen, -EINVAL,
					"cgroupsPath \"%s\": the slice name has an empty "
					"part (a leading, trailing or double '-')",
					cp);
			ret = put(out, outlen, &len, slice, i);
			if (!ret)
				ret = put(out, outlen, &len, ".slice/", 7);
		}
	}
	if (!ret && nlen > 6 && !strcmp(name + nlen - 6, ".slice")) {
		ret = put(out, outlen, &len, name, nlen);
	} else if (!ret) {
		ret = put(out, outlen, &len, prefix, plen);
		if (!ret && plen)
			ret = put(out, outlen, &len, "-", 1);
		if (!ret)
			ret = put(out, outlen, &len, name, nlen);
		if (!ret)
			ret = put(out, outlen, &len, ".scope", 6);
	}
	if (ret)
		return rw_fail_msg(err, errlen, ret, "cgroupsPath \"%.80s...\": too long", cp);
	return 0;
}

/* The cgroupfs driver: an absolute path under the root, each part a plain name. */
static int cgroupfs_dir(const char *cp, char *out, size_t outlen, char *err, size_t errlen)
{
	const char *p = cp + 1;
	size_t len = 0;

	out[0] = '\0';
	while (*p) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n == 0 || is_dot(p, n))
			return rw_fail_msg(err, errlen, -EINVAL,
					   "cgroupsPath \"%s\": an empty, \".\" or \"..\" part",
					   cp);
		if ((len && put(out, outlen, &len, "/", 1)) || put(out, outlen, &len, p, n))
			return rw_fail_msg(err, errlen, -ENAMETOOLONG,
					   "cgroupsPath \"%.80s...\": too long", cp);
		p += n;
		if (*p == '/' && !p[1])
			return rw_fail_msg(err, errlen, -EINVAL,
					   "cgroupsPath \"%s\": an empty, \".\" or \"..\" part",
					   cp);
		if (*p)
			p++;
	}
	if (!len)
		return rw_fail_msg(err, errlen, -EINVAL,
				   "cgroupsPath \"%s\": the root itself, not a container's", cp);
	return 0;
}

int rw_cgroup2_dir(const char *cp, char *out, size_t outlen, char *err, size_t errlen)
{
	if (outlen > PATH_MAX)
		outlen = PATH_MAX;
	if (!cp || !*cp)
		return rw_fail_msg(err, errlen, -EINVAL, "cgroupsPath is empty");
	if (strlen(cp) >= PATH_MAX)
		return rw_fail_msg(err, errlen, -ENAMETOOLONG,
				   "cgroupsPath is longer than %d bytes", PATH_MAX - 1);
	for (const char *p = cp; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return rw_fail_msg(err, errlen, -EINVAL,
					   "cgroupsPath has a control character at byte %zu",
					   (size_t)(p - cp));
	if (cp[0] == '/')
		return cgroupfs_dir(cp, out, outlen, err, errlen);
	if (!strchr(cp, ':'))
		return rw_fail_msg(err, errlen, -EINVAL,
				   "cgroupsPath \"%s\": a relative path (the runtime's own cgroup "
				   "is not known here)",
				   cp);
	return systemd_dir(cp, out, outlen, err, errlen);
}

int rw_cgroup2_id(const char *path, uint64_t *id, char *err, size_t errlen)
{
	union {
		struct file_handle fh;
		char buf[sizeof(struct file_handle) + 64];
	} h = {.fh.handle_bytes = 64};
	int mount_id;

	if (name_to_handle_at(AT_FDCWD, path, &h.fh, &mount_id, 0))
		return rw_fail_msg(err, errlen, -errno, "%s: %s", path, strerror(errno));
	if (h.fh.handle_bytes != sizeof(*id))
		return rw_fail_msg(err, errlen, -EPROTO,
				   "%s: a file handle of %u bytes, not a cgroup v2 directory's 8",
				   path, h.fh.handle_bytes);
	memcpy(id, h.fh.f_handle, sizeof(*id));
	return 0;
}

int rw_cgroup2_self_id(uint64_t *id, char *err, size_t errlen)
{
	char root[PATH_MAX], line[PATH_MAX + 8], path[2 * PATH_MAX + 16];
	bool found = false;
	FILE *f;
	int ret;

	ret = rw_cgroup2_mount(NULL, root, sizeof(root), err, errlen);
	if (ret)
		return ret;
	f = fopen("/proc/self/cgroup", "r");
	if (!f)
		return rw_fail_msg(err, errlen, -errno, "/proc/self/cgroup: %s", strerror(errno));
	while (!found && fgets(line, sizeof(line), f))
		if (!strncmp(line, "0::", 3)) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(path, sizeof(path), "%s%s", root, line + 3);
			found = true;
		}
	fclose(f);
	if (!found)
		return rw_fail_msg(err, errlen, -ENOENT,
				   "/proc/self/cgroup: no cgroup v2 entry (\"0::\")");
	return rw_cgroup2_id(path, id, err, errlen);
}
