#!/bin/bash
# Old and new kvik, taking turns: FileHandle device reads (bench/kvikio/run.sh's
# kvik cells, compat on) at 64 MiB, 1 GiB and 4 GiB, 1/4/16/32 workers, median of 5.
G=$1; ROUNDS=${ROUNDS:-2}
for s in 64 1024 4096; do head -c $((s<<20)) /dev/urandom > /dev/shm/cell$s; done
for r in $(seq $ROUNDS); do for v in old new; do
  b=$G/kvik; [ $v = old ] && b=$G/old/kvik
  for s in 64 1024 4096; do
    $b bench --file /dev/shm/cell$s --op read --memory device --compat on --threads 1,4,16,32 --repeats 5 --warmup 1 --no-baselines 2>&1 |
      awk -v r=$r -v v=$v -v s=$s '$2=="kvik" && $3=="posix+bounce" {print "CELL", r, v, s "MiB", "t" $5, $6}'
  done
done; done
