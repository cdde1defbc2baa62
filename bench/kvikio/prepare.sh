#!/usr/bin/env bash
# prepare.sh: export the sources run.sh needs from git clones (or bare git
# directories) of rapidsai/kvikio, bshoshany/thread-pool and NVIDIA/NVTX
# into DEST, trimmed to what the build reads (under 10 MiB):
#
#   bench/kvikio/prepare.sh DEST KVIKIO_GIT THREAD_POOL_GIT NVTX_GIT
#
# DEST/kvikio (cpp/src, cpp/include, VERSION), DEST/deps/include
# (BS_thread_pool.hpp, nvtx3/). Versions: KVIKIO_REF [v26.06.00],
# THREAD_POOL_REF [v4.1.0], NVTX_REF [v3.1.0]. Then run.sh with
# KVIKIO_SRC=DEST/kvikio THREAD_POOL_INC=DEST/deps/include
# NVTX_INC=DEST/deps/include.
set -euo pipefail
(($# == 4)) || { echo "usage: prepare.sh DEST KVIKIO_GIT THREAD_POOL_GIT NVTX_GIT" >&2; exit 2; }
dest=$1 kvikio=$2 tp=$3 nvtx=$4
gitdir() { if [[ -d $1/.git ]]; then echo "$1/.git"; else echo "$1"; fi; }
rm -rf "$dest/kvikio" "$dest/deps"
mkdir -p "$dest/kvikio" "$dest/deps/include"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git --git-dir="$(gitdir "$kvikio")" archive "${KVIKIO_REF:-v26.06.00}" cpp/src cpp/include VERSION | tar -x -C "$dest/kvikio"
git --git-dir="$(gitdir "$tp")" archive "${THREAD_POOL_REF:-v4.1.0}" include/BS_thread_pool.hpp | tar -x -C "$tmp"
git --git-dir="$(gitdir "$nvtx")" archive "${NVTX_REF:-v3.1.0}" c/include/nvtx3 | tar -x -C "$tmp"
mv "$tmp/include/BS_thread_pool.hpp" "$tmp/c/include/nvtx3" "$dest/deps/include/"
du -sh "$dest"
