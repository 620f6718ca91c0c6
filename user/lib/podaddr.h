/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* podaddr.h: which IPv4 and IPv6 addresses can be a pod's. One answer for every path that binds a veth to
 * a pod or names one (the snapshot's runs[].pods, runwall-cni's prevResult, the agent's /32
 * and /128 routes): an address no pod can have is refused where it comes in, never bound.
 */
#ifndef RUNWALL_PODADDR_H
#define RUNWALL_PODADDR_H

#include <stddef.h>
#include <linux/types.h>

/* Why addr (network byte order) cannot be a pod's address, or NULL when it can: 0.0.0.0/8
 * ("this network", 0.0.0.0 included), 127.0.0.0/8 (loopback), 169.254.0.0/16 (link-local) but
 * 169.254.172.0/22 (an IPv6 EKS node's node-local pod IPv4, which the node SNATs), 224.0.0.0/4
 * (multicast), 240.0.0.0/4 (reserved, 255.255.255.255 included). A short phrase,
 * "a loopback address", for "ADDR is not a pod address: %s".
 */
const char *rw_pod_addr_refusal(__be32 addr);

/* A pod's address given as a CIDR, as CNI's prevResult.ips[].address does ("10.1.4.7/24"; a
 * bare address is taken as /32). 0 with *addr set when it can be a pod's; -EAFNOSUPPORT when
 * the text before the slash is not an IPv4 address (IPv6, or not an address: not ours to
 * judge); -EINVAL with why set (the phrase after "is not a pod address: ") when it cannot be:
 * one of rw_pod_addr_refusal()'s, a prefix length that is not 0..32 in decimal, or, with a
 * prefix shorter than /31, the prefix's network or broadcast address.
 */
int rw_pod_cidr_check(const char *cidr, __be32 *addr, char *why, size_t whylen);

/* Why addr (__be32[4], network byte order) cannot be a pod's IPv6 address, or NULL when it can:
 * a pod's IPv6 is global unicast (2000::/3) or unique local (fc00::/7); never ::, ::1, link-local
 * (fe80::/10: the veth's own scope, which NDP uses and nothing binds) or multicast (ff00::/8).
 */
const char *rw_pod_addr6_refusal(const __be32 addr[4]);

/* rw_pod_cidr_check() of an IPv6 address ("2600:1f14:abc::7/128"; a bare address is /128):
 * -EAFNOSUPPORT when the text before the slash is not an IPv6 address; -EINVAL with why set for
 * one of rw_pod_addr6_refusal()'s, a prefix length that is not 0..128 in decimal, or, with a
 * prefix shorter than /127, the prefix's subnet-router anycast address (host bits all zero).
 */
int rw_pod_cidr6_check(const char *cidr, __be32 addr[4], char *why, size_t whylen);

#endif /* RUNWALL_PODADDR_H */
