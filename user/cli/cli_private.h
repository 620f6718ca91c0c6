/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* cli_private.h: what `runwall explain` and `runwall replay` judge with: the production programs
 * loaded privately and a crafted packet judged by them (user/lib/dryrun.h, shared with the
 * agent's staged snapshot), and the probe as a line and as JSON (cli_probe.h).
 */
#ifndef RUNWALL_CLI_PRIVATE_H
#define RUNWALL_CLI_PRIVATE_H

#include "cli_probe.h"
#include "dryrun.h"

#endif /* RUNWALL_CLI_PRIVATE_H */
