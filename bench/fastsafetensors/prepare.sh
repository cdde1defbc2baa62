#!/bin/bash
# Make the fastsafetensors source tarball that run.sh builds on the GPU
# machine: G/peer/fastsafetensors.tar.xz (about 60 KB: its tests, docs,
# examples and perf tool left out) and G/peer/fastsafetensors.commit, from a
# git directory of foundation-model-stack/fastsafetensors (a mirror from
# the session's fetch tool by default, or FST_GIT). Nothing of it is
# committed here; G (e.g. .gpu) is git-ignored.
#
#   bash bench/fastsafetensors/prepare.sh G [REF]    (REF: 0.3.2)
set -eu -o pipefail
G=${1:?usage: bash bench/fastsafetensors/prepare.sh GPU_DIR [REF]}
REF=${2:-0.3.2}
GIT=${FST_GIT:-/work/.mirror/foundation-model-stack+fastsafetensors/repo}
[ -d "$GIT" ] || { echo "no git directory at $GIT (fetch github:foundation-model-stack/fastsafetensors, or set FST_GIT)" >&2; exit 1; }
mkdir -p "$G/peer"
commit=$(git --git-dir="$GIT" rev-parse "$REF^{commit}")
git --git-dir="$GIT" archive --format=tar --prefix="fastsafetensors-$REF/" "$commit" -- . \
  ':(exclude)tests' ':(exclude)docs' ':(exclude)examples' ':(exclude)perf' ':(exclude).github' |
  xz -9 >"$G/peer/fastsafetensors.tar.xz"
echo "fastsafetensors $REF $commit" >"$G/peer/fastsafetensors.commit"
ls -l "$G/peer/fastsafetensors.tar.xz"
cat "$G/peer/fastsafetensors.commit"
