#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# The image `make image` built (BUILD/image/runwall.oci.tar), opened the way a node would: the
# archive is imported into buildah's private storage (the one scripts/image.sh configured under
# BUILD/image) and its root file system mounted with `buildah mount`. Then:
# - the archive's name and labels: the tag is `git describe`, the version label the same, the
#   revision label the commit, the licences those of the source headers;
# - size: at most 50 MB uncompressed;
# - every binary in /usr/local/bin starts under chroot and prints its usage (`--help`), and the
#   loader finds every shared library of every binary and library in the image;
# - nothing is setuid or setgid;
# - the image's ENTRYPOINT and CMD are the DaemonSet's command and args, and every container of
#   the deployable manifests (BUILD/image/kustomization.yaml: manifests/ with this image) uses
#   this image, and its program exists in the image and accepts its arguments (`--help` appended:
#   the whole command line is parsed, then usage is printed and nothing runs; a command with no
#   option of its own, like `detach`, is asked `help COMMAND` after the global options).
#
# The containers are not run with `podman run`: this machine refuses the setrlimit calls of
# podman's runtime (crun/runc set RLIMIT_NOFILE and others for the container), so the image is
# checked under chroot instead. The agent itself, with the DaemonSet's exact command and
# capabilities, runs in tests/netns/test_manifest.sh.
#
#   tests/image/test_image.sh [BUILD]
set -euo pipefail

build=${1:-build}
cd "$(dirname "$0")/../.."
build=$(realpath "$build")
img=$build/image
archive=$img/runwall.oci.tar
n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
check() { # check "description" command...
	local what=$1
	shift
	if "$@"; then ok "$what"; else not_ok "$what"; fi
}

[ -e "$archive" ] || { echo "Bail out! $archive is missing: run make image"; exit 1; }
[ -e "$img/storage.conf" ] || { echo "Bail out! $img/storage.conf is missing: run make image"; exit 1; }
export CONTAINERS_STORAGE_CONF=$img/storage.conf
export CONTAINERS_REGISTRIES_CONF=$img/registries.conf
work=$(mktemp -d /tmp/rwtest-image.XXXXXX)
ctr=
image_id=
cleanup() {
	set +e
	if [ -n "$ctr" ]; then
		buildah --storage-driver vfs umount "$ctr" >/dev/null
		buildah --storage-driver vfs rm "$ctr" >/dev/null
	fi
	[ -n "$image_id" ] && buildah --storage-driver vfs rmi -f "$image_id" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT

# The archive's name, config and labels.
ref=$(tar -xOf "$archive" index.json | python3 -c '
import json, sys
print(json.load(sys.stdin)["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"])')
skopeo --policy "$img/policy.json" inspect --config "oci-archive:$archive" >"$work/config.json"
tag=$(git describe --tags --always --dirty)
label() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["config"]["Labels"].get(sys.argv[2], ""))' "$work/config.json" "$1"; }
check "the archive's image is tagged with git describe: $ref" test "${ref##*:}" = "$tag"
check "label version = $tag" test "$(label org.opencontainers.image.version)" = "$tag"
check "label revision = $(git rev-parse --short HEAD)" test "$(label org.opencontainers.image.revision)" = "$(git rev-parse HEAD)"
check "label licenses = GPL-2.0 OR BSD-2-Clause (as the source headers say)" \
	test "$(label org.opencontainers.image.licenses)" = "GPL-2.0 OR BSD-2-Clause"
headers=$(grep -rh --include='*.[ch]' -o 'SPDX-License-Identifier: .*' bpf include user | sed 's/ \*\/$//' | sort -u)
check "the source headers say the same: $headers" test "$headers" = "SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause"

# Mount it.
image_id=$(buildah --storage-driver vfs pull --quiet --signature-policy "$img/policy.json" "oci-archive:$archive")
ctr=$(buildah --storage-driver vfs from --quiet --pull-never "$image_id")
mnt=$(buildah --storage-driver vfs mount "$ctr")
[ -d "$mnt/usr/local/bin" ] || { echo "Bail out! nothing mounted at $mnt"; exit 1; }

size=$(du -sb --apparent-size "$mnt" | cut -f1)
if [ "$size" -le $((50 * 1000 * 1000)) ]; then
	ok "size: $((size / 1000)) kB uncompressed (at most 50 MB)"
else
	not_ok "size: $((size / 1000)) kB uncompressed is over 50 MB"
fi

# Every binary starts and prints its usage.
bins=$(cd "$mnt/usr/local/bin" && ls)
for b in $bins; do
	if out=$(chroot "$mnt" "/usr/local/bin/$b" --help 2>&1) && grep -qi usage <<<"$out"; then
		ok "$b --help runs under chroot ($(head -n 1 <<<"$out"))"
	else
		not_ok "$b --help under chroot"; echo "$out" | head -n 5 | sed 's/^/# /'
	fi
done
check "build/runwall-cni is in the image when it is built" \
	bash -c "[ ! -e '$build/runwall-cni' ] || [ -x '$mnt/usr/local/bin/runwall-cni' ]"
# runwall-cni is copied onto the host by the init container and run there by the container
# runtime: the host (Amazon Linux 2023) has none of the image's libraries but glibc and libmnl
# (iproute's), so it may ask for nothing else, and no glibc symbol newer than AL2023's 2.34.
if [ -e "$mnt/usr/local/bin/runwall-cni" ]; then
	needed=$(readelf -dW "$mnt/usr/local/bin/runwall-cni" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
	check "runwall-cni needs only libc and libmnl from the host (it needs: $needed)" \
		test "$needed" = "libc.so.6 libmnl.so.0 "
	newest=$(objdump -T "$mnt/usr/local/bin/runwall-cni" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)
	check "runwall-cni asks for glibc 2.34 at most ($newest)" \
		bash -c "printf '%s\n' GLIBC_2.34 '$newest' | sort -V -C"
fi

# Every ELF file's libraries, resolved by the image's own loader.
missing=0
elves=0
while IFS= read -r -d '' f; do
	head -c 4 "$f" | grep -q 'ELF' || continue
	rel=/${f#"$mnt"/}
	[ "$rel" = /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 ] && continue
	[ "$rel" = /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 ] && continue
	elves=$((elves + 1))
	if ! out=$(chroot "$mnt" /lib64/ld-linux-x86-64.so.2 --list "$rel" 2>&1) || grep -q "not found" <<<"$out"; then
		missing=$((missing + 1))
		echo "# $rel:"; grep "not found" <<<"$out" | sed 's/^/#  /'
	fi
done < <(find "$mnt" -type f \( -path "$mnt/usr/local/bin/*" -o -name '*.so*' \) -print0)
check "the loader finds every library of $elves ELF files (binaries and libraries)" test "$missing" -eq 0 -a "$elves" -gt 10

setuid=$(find "$mnt" -xdev -type f -perm /6000)
check "nothing is setuid or setgid${setuid:+: $setuid}" test -z "$setuid"

# The deployable manifests, against the image.
if ! kubectl kustomize "$img" >"$work/rendered.yaml" 2>"$work/kustomize.err"; then
	not_ok "kubectl kustomize $img"; sed 's/^/# /' "$work/kustomize.err"
	echo "1..$n"; exit 1
fi
python3 -c 'import json, sys, yaml; json.dump([d for d in yaml.safe_load_all(open(sys.argv[1])) if d], sys.stdout)' \
	"$work/rendered.yaml" >"$work/rendered.json"
if out=$(python3 - "$work/rendered.json" "$work/config.json" <<'PY'
import json, sys
ds = next(d for d in json.load(open(sys.argv[1])) if d["kind"] == "DaemonSet")
agent = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "agent")
cfg = json.load(open(sys.argv[2]))["config"]
if (agent.get("command"), agent.get("args")) != (cfg.get("Entrypoint"), cfg.get("Cmd")):
    sys.exit(f'DaemonSet: {agent.get("command")} {agent.get("args")}\nimage: {cfg.get("Entrypoint")} {cfg.get("Cmd")}')
PY
); then
	ok "the image's ENTRYPOINT and CMD are the DaemonSet's command and args"
else
	not_ok "the image's ENTRYPOINT and CMD are the DaemonSet's command and args"; echo "$out" | sed 's/^/# /'
fi

# Every container of the deployable manifests: its image is this one, its program is in it and
# takes its arguments.
python3 - "$work/rendered.json" >"$work/containers" <<'PY'
import json, sys
for d in json.load(open(sys.argv[1])):
    pod = d.get("spec", {}).get("template", {}).get("spec", {})
    for c in pod.get("initContainers", []) + pod.get("containers", []):
        print(json.dumps({"where": f'{d["kind"]}/{d["metadata"]["name"]} {c["name"]}', "image": c["image"],
                          "argv": c.get("command", []) + c.get("args", [])}))
# The one-shot detach pod (manifests/ops/detach.yaml) runs this image too; its image is set
# by hand (docs/operations.md), so only its programs and arguments are checked.
import yaml
pod = yaml.safe_load(open("manifests/ops/detach.yaml"))
for c in pod["spec"].get("initContainers", []) + pod["spec"]["containers"]:
    print(json.dumps({"where": f'manifests/ops/detach.yaml {c["name"]}', "image": None,
                      "argv": c.get("command", []) + c.get("args", [])}))
PY
while IFS= read -r line; do
	where=$(jq -r .where <<<"$line")
	if [ "$(jq -r .image <<<"$line")" != null ]; then
		check "$where: image $(jq -r .image <<<"$line") is the archive's" test "$(jq -r .image <<<"$line")" = "$ref"
	fi
	mapfile -t argv < <(jq -r '.argv[]' <<<"$line")
	# A command that takes no option (`runwall ... detach`) is asked `help COMMAND` instead.
	last=${argv[${#argv[@]} - 1]}
	if [ "${#argv[@]}" -gt 1 ] && [ "${last#-}" = "$last" ] && [ "${last#/}" = "$last" ]; then
		try=("${argv[@]:0:${#argv[@]}-1}" help "$last")
	else
		try=("${argv[@]}" --help)
	fi
	if [ ! -x "$mnt${argv[0]}" ]; then
		not_ok "$where: ${argv[0]} is not in the image"
	elif out=$(chroot "$mnt" "${try[@]}" 2>&1); then
		ok "$where: the image's ${argv[0]} accepts its arguments: ${argv[*]:1}"
	else
		not_ok "$where: ${try[*]}"; echo "$out" | head -n 3 | sed 's/^/# /'
	fi
done <"$work/containers"

echo "1..$n"
[ "$failed" -eq 0 ]
