#!/bin/bash
# Call D: the two-GPU loads of the current code on a fresh machine, three
# rounds; two concurrent ReadDevice calls; the C probe, one process against two.
# Run from the repository root on the GPU machine, with the binaries
# (kvik, *.test, xz-compressed) in the carried folder G: bash THIS G
G=$(cd "${1:?folder of binaries}" && pwd) R=$(pwd)
cd "$G" && xz -dT0 *.xz 2>/dev/null; chmod +x kvik *.test versitygw 2>/dev/null; cd "$R"
export OUT=${OUT:-/tmp/out} PYTHONUNBUFFERED=1 KVIKIO_COMPAT_MODE=on
L=$OUT/loads.txt
(nvidia-smi -L; nproc; date -u) > $L
timeout 200 python3 bench/safetensors_peers.py /dev/shm/ckpt.safetensors --make --gb 8 2>&1 | tail -1 >> $L
(cd gguf && KVIK_GGUF_MAKE=/dev/shm/model.gguf KVIK_GGUF_GB=8 timeout 180 $G/gguf.test -test.run '^TestMakeSynthetic$' 2>&1 | tail -1 >> $L)
for r in 1 2 3; do
  echo "=== $(date -u +%T) round $r" >> $L
  timeout 120 $G/kvik bench --safetensors /dev/shm/ckpt.safetensors --repeats 9 2>&1 | tail -10 >> $L
  timeout 120 $G/kvik bench --gguf /dev/shm/model.gguf --repeats 9 2>&1 | tail -10 >> $L
done
rm -f /dev/shm/model.gguf
echo "=== $(date -u +%T) BenchmarkGPUs 4 GiB" >> $L
KVIK_BENCH_DIR=/dev/shm KVIK_BENCH_SIZE=4294967296 timeout 150 $G/kvik.test -test.run '^$' -test.bench 'GPUs$' -test.benchtime 5x -test.count 3 2>&1 | grep -E 'Benchmark|FAIL' >> $L
rm -f /dev/shm/kvik-bench-*
echo "=== $(date -u +%T) probe: pread into pinned buffers, copies to the GPUs, 2 MiB chunks (bench/probes/pread_steady.c)" >> $L
gcc -O2 -pthread bench/probes/pread_steady.c -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcuda -o /tmp/pread_steady
PS_TASK_KIB=2048 PS_THREADS=32 PS_GPUS=2 PS_FDS=shared /tmp/pread_steady /dev/shm/ckpt.safetensors 2>&1 | sed 's/^/one process, two GPUs: /' >> $L
(CUDA_VISIBLE_DEVICES=0 PS_TASK_KIB=2048 PS_THREADS=16 PS_GPUS=1 PS_FDS=shared /tmp/pread_steady /dev/shm/ckpt.safetensors > /tmp/s0 2>&1 &
 CUDA_VISIBLE_DEVICES=1 PS_TASK_KIB=2048 PS_THREADS=16 PS_GPUS=1 PS_FDS=shared /tmp/pread_steady /dev/shm/ckpt.safetensors > /tmp/s1 2>&1; wait)
cat /tmp/s0 /tmp/s1 | sed 's/^/two processes, one GPU each: /' >> $L
rm -f /dev/shm/ckpt.safetensors
grep -E "^===|Load gpu0 |balanced  |two GPUs / one GPU:|Benchmark|process" $L
