/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* install.h: putting runwall-cni on a node and taking it away (what the DaemonSet's init
 * container runs): the binary into the CNI bin folder, and a {"type": "runwall-cni", ...}
 * entry at the end of the plugins of the file the runtime loads (a .conflist), chained after the
 * network plugin.
 */
#ifndef RUNWALL_CNI_INSTALL_H
#define RUNWALL_CNI_INSTALL_H

#include <jansson.h>
#include <stdbool.h>

#include "cnichain.h" /* the conflist edit, shared with the agent's repair */

/* The commands. 0 on success, a negative errno with a message in err. */
int rw_cni_install(const char *self, const char *bin_dir, const char *conf_dir, json_t *entry,
		   char *err, size_t errlen);
int rw_cni_uninstall(const char *bin_dir, const char *conf_dir, char *err, size_t errlen);

#endif /* RUNWALL_CNI_INSTALL_H */
