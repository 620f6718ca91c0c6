/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* map_defs.h: the shapes of the datapath's map definitions, as macros: maps.h defines every map
 * with them, and the bench's model of the tables (tests/bench/lookups.bpf.c) its copies, so that
 * a model is the datapath's shape and not a copy of it. No map is defined here.
 *
 * API
 *   offers: (no functions) RW_MAP(), RW_MAP_INNER(), RW_MAP_OUTER()
 *   needs:  (nothing)
 */
#ifndef RUNWALL_BPF_MAP_DEFS_H
#define RUNWALL_BPF_MAP_DEFS_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* A map `name` of BPF_MAP_TYPE_<kind>, `max` entries of key_type -> value_type, with `pin` a
 * LIBBPF_PIN_* (the datapath's maps are all LIBBPF_PIN_BY_NAME).
 */
#define RW_MAP(name, kind, max, key_type, value_type, pin) \
	struct {                                           \
		__uint(type, BPF_MAP_TYPE_##kind);         \
		__uint(max_entries, max);                  \
		__type(key, key_type);                     \
		__type(value, value_type);                 \
		__uint(pinning, pin);                      \
	} name SEC(".maps")

/* The template `struct name` of the inner maps of an outer map: sizes only, not BTF types (clang
 * 14 emits an inner definition's key and value types only as forward declarations, and libbpf
 * then refuses them: "can't determine value size").
 */
#define RW_MAP_INNER(name, kind, max, flags, key_sz, value_sz) \
	struct name {                                          \
		__uint(type, BPF_MAP_TYPE_##kind);             \
		__uint(max_entries, max);                      \
		__uint(map_flags, flags);                      \
		__uint(key_size, key_sz);                      \
		__uint(value_size, value_sz);                  \
	}

/* An outer map `name` of BPF_MAP_TYPE_<kind> (ARRAY_OF_MAPS, HASH_OF_MAPS), `max` entries by a
 * __u32 key, of inner maps of the template `struct inner`, with `pin` a LIBBPF_PIN_*.
 */
#define RW_MAP_OUTER(name, kind, max, inner, pin)  \
	struct {                                   \
		__uint(type, BPF_MAP_TYPE_##kind); \
		__uint(max_entries, max);          \
		__type(key, __u32);                \
		__uint(pinning, pin);              \
		__array(values, struct inner);     \
	} name SEC(".maps")

#endif /* RUNWALL_BPF_MAP_DEFS_H */
