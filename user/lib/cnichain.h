/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* cnichain.h: runwall-cni's place in the node's CNI configuration. The container runtime
 * (containerd, CRI-O: libcni's ConfFiles, sorted) loads the first file of the conf folder, in
 * lexical order, whose name ends in .conf, .conflist or .json; runwall-cni is chained there as
 * the last plugin of that file's "plugins" (a conflist). runwall-cni install writes the entry
 * once; the agent (--cni-conf-dir) puts it back whenever the network plugin rewrites its file
 * (aws-node does on every start). Files are written whole to a temporary name in the folder and
 * renamed over the old one, so a runtime never reads half of one.
 */
#ifndef RUNWALL_CNICHAIN_H
#define RUNWALL_CNICHAIN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define RW_CNI_TYPE "runwall-cni"

/* Edit one conflist document in memory: put `entry` (whose "type" is RW_CNI_TYPE) in plugins,
 * replacing an existing runwall-cni entry in place or appending it, or with entry == NULL take
 * every runwall-cni entry out. *changed says whether the document differs. 0, or -EINVAL with
 * a message in err when the document is not a conflist.
 */
int rw_cni_conflist_edit(json_t *doc, json_t *entry, bool *changed, char *err, size_t errlen);

/* Whether a conf file's name says it holds a list of plugins (".conflist"): the only kind
 * runwall-cni can be chained into.
 */
bool rw_cni_is_conflist(const char *name);

/* The file the runtime loads: the first name in lexical order ending in .conf, .conflist or
 * .json (not starting with '.'). 0 with name set; -ENOENT when there is none; another negative
 * errno (with err set) when the folder cannot be read.
 */
int rw_cni_conf_pick(const char *conf_dir, char *name, size_t namelen, char *err, size_t errlen);

/* Apply rw_cni_conflist_edit() to conf_dir/name, writing the file only when it changes.
 * keep_existing: an entry of type runwall-cni already there is left as it is (the agent's
 * repair does not fight the entry the installer wrote), else it is replaced by `entry`.
 * *changed (may be NULL) says whether the file was written.
 */
int rw_cni_conf_edit_file(const char *conf_dir, const char *name, json_t *entry, bool keep_existing,
			  bool *changed, char *err, size_t errlen);

/* Write buf to dir/name atomically (a temporary file in dir renamed over it), with mode. */
int rw_cni_write_atomic(const char *dir, const char *name, const void *buf, size_t len,
			unsigned int mode, char *err, size_t errlen);

/* What the chain looks like. */
struct rw_cni_chain {
	bool chained;	/* the picked file is a conflist with a runwall-cni entry */
	bool repaired;	/* this call wrote the entry back */
	char file[256]; /* the picked file ("" when none) */
	char why[512];	/* when not chained: why (no file, not a conflist, unreadable...) */
};

/* Make sure the file the runtime loads chains runwall-cni: the entry appended when it is
 * missing (an entry already there is kept). A picked .conf or .json (one plugin, not a list)
 * is not rewritten: it is reported, with why, as not chained. 0 when chained (repaired or not),
 * a negative errno otherwise; st is filled either way.
 */
int rw_cni_chain_ensure(const char *conf_dir, json_t *entry, struct rw_cni_chain *st);

#endif /* RUNWALL_CNICHAIN_H */
