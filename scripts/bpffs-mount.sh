#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# bpffs-mount.sh: mount bpffs on /sys/fs/bpf unless what is there is one already (every script
# and suite that pins calls it first).
#
# The test is the filesystem's type (statfs(2): BPF_FS_MAGIC, "bpf_fs"), not `mount | grep -q`:
# under `set -o pipefail` that pipeline fails when grep stops at the first match and mount dies
# of SIGPIPE with more to write, which it has on a node of a few hundred pods (each network
# namespace is a mount). The caller then mounted a fresh bpffs over the one in use: every pin
# hidden, runwall-cni refusing ADDs as "runwall is not set up on this node (No such file or
# directory)" and the agent finding its link pins gone, until that mount is taken away.
[ "$(stat -f -c %T /sys/fs/bpf 2>/dev/null)" = bpf_fs ] || mount -t bpf bpf /sys/fs/bpf
