#!/bin/bash
# Call B: two-GPU loads, the new code first (fresh machine), then old, then new; then GPU tests.
# Run from the repository root on the GPU machine, with the binaries
# (kvik, *.test, xz-compressed) in the carried folder G: bash THIS G
G=$(cd "${1:?folder of binaries}" && pwd) R=$(pwd)
cd "$G" && xz -dT0 *.xz old/*.xz 2>/dev/null; chmod +x kvik *.test versitygw old/* 2>/dev/null; cd "$R"
export OUT=${OUT:-/tmp/out} PYTHONUNBUFFERED=1 KVIKIO_COMPAT_MODE=on
L=$OUT/loads.txt
(nvidia-smi -L; nproc; date -u) > $L
timeout 200 python3 bench/safetensors_peers.py /dev/shm/ckpt.safetensors --make --gb 8 2>&1 | tail -1 >> $L
(cd gguf && KVIK_GGUF_MAKE=/dev/shm/model.gguf KVIK_GGUF_GB=8 timeout 180 $G/gguf.test -test.run '^TestMakeSynthetic$' 2>&1 | tail -1 >> $L)
for v in new old new; do
  b=$G; [ $v = old ] && b=$G/old
  echo "=== $(date -u +%T) $v" >> $L
  timeout 120 $b/kvik bench --safetensors /dev/shm/ckpt.safetensors --repeats 9 2>&1 | tail -10 >> $L
  timeout 120 $b/kvik bench --gguf /dev/shm/model.gguf --repeats 9 2>&1 | tail -10 >> $L
done
rm -f /dev/shm/ckpt.safetensors /dev/shm/model.gguf
echo "=== $(date -u +%T) tests" >> $L
PKGS="safetensors:safetensors zarr:zarr npy:npy" timeout 330 bash bench/gpu_tests.sh $G > $OUT/tests.log 2>&1
cd $OUT && tar czf logs.tgz noshim-* shim-* 2>/dev/null; rm -f noshim-*.txt shim-*.txt
grep -E "^===|Load gpu0 |balanced  |two GPUs / one GPU:" $L; cat $OUT/summary.txt
