#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# `make image`: runwall's OCI image, built with no registry and no daemon.
#
#   scripts/image.sh BUILD [REPO]        (REPO: the image's name, default localhost/runwall)
#
# 1. The root file system (scripts/image-rootfs.sh), rebuilt only when that script changes.
# 2. The build context build/image/context: rootfs.tar and bin/ (build/runwall, and
#    build/runwall-cni when it exists).
# 3. `buildah bud` of the Containerfile (FROM scratch; no RUN step, so no runtime is needed),
#    tagged REPO:TAG where TAG is `git describe --tags --always --dirty`, labelled with the
#    version, the source revision and the licences.
# 4. `skopeo copy` to the OCI archive BUILD/image/runwall-TAG.oci.tar (and runwall.oci.tar, a
#    link to the newest), then the image is removed from the build storage.
# 5. BUILD/image/kustomization.yaml: manifests/ with its `runwall` image set to REPO:TAG, so that
#    `kubectl apply -k BUILD/image` deploys exactly what was built (see docs/operations.md).
#
# Buildah and skopeo use their own storage (vfs driver), configuration and signature policy under
# BUILD/image: nothing global is read or changed.
set -euo pipefail

build=${1:?usage: scripts/image.sh BUILD [REPO]}
repo=${2:-localhost/runwall}
cd "$(dirname "$0")/.."
mkdir -p "$build/image"
build=$(realpath "$build")
img=$build/image
ctx=$img/context

for b in runwall; do
	[ -x "$build/$b" ] || { echo "image: $build/$b is missing: run make" >&2; exit 1; }
done

tag=$(git describe --tags --always --dirty)
revision=$(git rev-parse HEAD)
export SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)

# Containers configuration of our own (containers-storage.conf(5), containers-registries.conf(5),
# containers-policy.json(5)); the environment points buildah and skopeo at it.
cat >"$img/storage.conf" <<CONF
[storage]
driver = "vfs"
graphroot = "$img/storage"
runroot = "$img/storage-run"
CONF
printf 'unqualified-search-registries = []\n' >"$img/registries.conf"
printf '{"default": [{"type": "insecureAcceptAnything"}]}\n' >"$img/policy.json"
export CONTAINERS_STORAGE_CONF=$img/storage.conf
export CONTAINERS_REGISTRIES_CONF=$img/registries.conf
export BUILDAH_ISOLATION=chroot
store="containers-storage:[vfs@$img/storage+$img/storage-run]"

rootfs=$img/rootfs.tar
stamp=$img/rootfs.recipe
recipe=$(sha256sum scripts/image-rootfs.sh | cut -d' ' -f1)
if [ ! -s "$rootfs" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$recipe" ]; then
	echo "  ROOTFS   $rootfs (mmdebstrap, Debian 12)"
	scripts/image-rootfs.sh "$rootfs"
	echo "$recipe" >"$stamp"
fi

rm -rf "$ctx"
mkdir -p "$ctx/bin"
ln "$rootfs" "$ctx/rootfs.tar" 2>/dev/null || cp "$rootfs" "$ctx/rootfs.tar"
for b in runwall runwall-cni; do
	[ -e "$build/$b" ] || continue
	install -m 0755 "$build/$b" "$ctx/bin/$b"
	strip --strip-debug "$ctx/bin/$b"
done

echo "  IMAGE    $repo:$tag ($(ls "$ctx/bin" | tr '\n' ' '))"
buildah --storage-driver vfs bud --quiet --layers=false --timestamp "$SOURCE_DATE_EPOCH" \
	--signature-policy "$img/policy.json" \
	--build-arg VERSION="$tag" --build-arg REVISION="$revision" \
	-f Containerfile -t "$repo:$tag" "$ctx" >/dev/null

archive=$img/runwall-$tag.oci.tar
rm -f "$archive"
skopeo --policy "$img/policy.json" copy --quiet "$store$repo:$tag" "oci-archive:$archive:$repo:$tag"
ln -sf "$(basename "$archive")" "$img/runwall.oci.tar"
buildah --storage-driver vfs rmi "$repo:$tag" >/dev/null

# The deployable manifests for this image: manifests/ with the image set.
cat >"$img/kustomization.yaml" <<YAML
# Written by scripts/image.sh for $repo:$tag ($revision).
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$img" manifests)
images:
  - name: runwall
    newName: $repo
    newTag: "$tag"
YAML

# Uncompressed size: the layers' tar streams, as the node unpacks them.
size=$(python3 - "$archive" <<'PY'
import gzip, json, sys, tarfile
t = tarfile.open(sys.argv[1])
blob = lambda d: t.extractfile("blobs/" + d.replace(":", "/"))
index = json.load(t.extractfile("index.json"))
manifest = json.load(blob(index["manifests"][0]["digest"]))
total = 0
for layer in manifest["layers"]:
    f = blob(layer["digest"])
    if layer["mediaType"].endswith("gzip"):
        f = gzip.GzipFile(fileobj=f)
    while chunk := f.read(1 << 20):
        total += len(chunk)
print(total)
PY
)
echo "$size" >"$img/size"
echo "  ARCHIVE  $archive: $(du -k "$archive" | cut -f1) KiB compressed, $((size / 1024)) KiB uncompressed"
