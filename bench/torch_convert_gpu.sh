#!/bin/bash
# kvik cp CHECKPOINT.pt MODEL.safetensors against Python's conversion
# (torch.load, then safetensors.torch.save_file: bench/torch_peers.py
# --convert), in turn, ROUNDS (default 3) rounds, on /dev/shm: PyTorch
# writes a state dict of GB (default 2) of bfloat16 weights first. Each
# kvik run is timed by /usr/bin/time (wall seconds, the largest resident
# set), with and without --verify=false; G/kvik-old, when there, is
# another build timed the same way (the commit before a change). The
# first round compares kvik's file with save_file's byte for byte.
#
# Build here into the git-ignored folder G:
#   CGO_ENABLED=0 go build -ldflags=-s -o G/ ./cmd/kvik
# then carry G and run, there: bash bench/torch_convert_gpu.sh G
set -u
G=$(cd "$1" && pwd)
R=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
GB=${GB:-2}
ROUNDS=${ROUNDS:-3}
F=/dev/shm/kvik-convert.pt D=/dev/shm/kvik-convert.safetensors P=/dev/shm/kvik-convert-py.safetensors
mkdir -p "$OUT"
trap 'rm -f "$F" "$D" "$P"' EXIT
log=$OUT/convert.txt
python3 "$R/bench/torch_peers.py" --make "$F" --gb "$GB" | tee -a "$log"
for r in $(seq "$ROUNDS"); do
  for k in kvik kvik-old; do
    [ -x "$G/$k" ] || continue
    for v in --verify=false --verify=true; do
      rm -f "$D"
      /usr/bin/time -f "  wall %e s, max RSS %M KB ($k $v)" "$G/$k" cp "$v" "$F" "$D" >> "$log" 2>&1
    done
  done
  rm -f "$P"
  python3 "$R/bench/torch_peers.py" "$F" --convert "$P" >> "$log" 2>&1
  if [ "$r" = 1 ]; then
    rm -f "$D" && "$G/kvik" cp "$F" "$D" > /dev/null && cmp "$D" "$P" && echo "kvik's file is save_file's, byte for byte" >> "$log"
  fi
done
cat "$log"
