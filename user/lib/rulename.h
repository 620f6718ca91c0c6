/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* rulename.h: the rule that decided a verdict event, by name (docs/reasons.md, "Rule names").
 * One text for the event stream, `runwall drops`, the page, the flow log and access requests.
 */
#ifndef RUNWALL_RULENAME_H
#define RUNWALL_RULENAME_H

#include <stddef.h>
#include "runwall.h"
#include "policy.h"

/* Room for any name rw_event_rule_name() writes. */
#define RW_RULE_NAME_LEN 160

/* The rule behind `ev`'s verdict, into buf (always NUL-terminated):
 * - an allowed service "egress-proxy 172.20.0.10 tcp/443", a run's rule
 *   "run-b allow[1] 52.94.9.5 tcp/5432", an inbound rule "inbound streaming 10.0.0.0/8 tcp/8080";
 * - a metadata or private refusal the built-in entry ("169.254.169.254 metadata",
 *   "169.254.0.0/16 link-local"), the IPv4 one an IPv6 form carries with the form
 *   ("10.0.0.0/8 private in 64:ff9b::/96 NAT64"), the snapshot's "deny[2] 10.0.0.0/16", a pod's
 *   own "/64 of the pod" or "pod of run-b";
 * - any other verdict the fixed text of its built-in rule ("built-in: port 53 by a rule only").
 * What only the snapshot can name is named from `p` when it is the revision the event was judged
 * under; otherwise by position or kind with "(revision N, not in force)" (p may be NULL).
 */
void rw_event_rule_name(const struct rw_event *ev, const struct rw_policy *p, char *buf,
			size_t len);

/* The fixed text of a reason's built-in rule, or of an allow path that no snapshot entry names;
 * "" for reasons and paths whose name comes from the snapshot.
 */
const char *rw_reason_rule(unsigned int reason);
const char *rw_path_rule(unsigned int path);

/* The service of the snapshot whose address (or CIDR) holds ip, else "": how the page and the
 * flow's peer name a destination, whichever rule decided.
 */
const char *rw_policy_service_at(const struct rw_policy *p, __be32 ip);
/* The same for an IPv6 address (network byte order): the IPv6 services only. */
const char *rw_policy_service_at6(const struct rw_policy *p, const __be32 ip[4]);

#endif /* RUNWALL_RULENAME_H */
