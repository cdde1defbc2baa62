# Sourced by bench/zarr_local_gpu.sh and bench/zarr_remote_gpu.sh: Zarr
# reads from versitygw on loopback (bench/zarrremotebench), in two modes.
#
#  shared: versitygw and the bench on every core, as before;
#  split:  versitygw pinned (taskset) to SERVER_CPUS (default: the last
#          quarter of the cores this script may use, e.g. 12-15 of 16) and
#          the bench to the others, GOMAXPROCS their count.
#
# Why split: a real S3 server runs on other machines and spends none of
# the client's CPU, while versitygw on loopback serves each GET with the
# same cores that decode the chunks (its CPU time per byte is about the
# client's). In the shared mode every compressed read is held below its
# decode ceiling by the server's share of the cores; the split mode
# measures the client's pipeline against the ceiling on its own cores
# (zarrremotebench measures the ceilings inside the pinned process).
#
# versitygw runs with --keep-alive (KEEPALIVE=0: without): by default it
# answers every request with "Connection: close", so that each GET of a
# chunk paid a new TCP connection (connect, a receive window that starts
# at 128 KiB and so a body read in small pieces, a new transport buffer),
# which S3 servers do not ask of a client: on one client core a read of
# 1 MiB chunks took 1.6x the CPU (raw chunks) or 1.2x (zstd).
# KEEPALIVE=0 reproduces the results up to zarr-h200-2026-11-28.
#
# s3_modes G OUT ARGS... runs zarrremotebench (G/zarrremotebench, with
# ARGS) in each mode of MODES (default "shared split"), logs in
# OUT/s3-MODE.txt (ZRB_ARGS: more arguments, e.g. -host where there is
# no GPU); s3_summary OUT prints the table of each mode.

source "$(dirname "${BASH_SOURCE[0]}")/machine.sh"

S3_PORT=${S3_PORT:-7072}
KEEPALIVE=${KEEPALIVE:-1}
MODES=${MODES:-shared split}

# s3_unpack G prints the folder of G's programs: G, or where those
# gzipped in G (the carry takes 64 MiB) are unpacked.
s3_unpack() {
	local g f w=/dev/shm/kvik-zarr-bin
	g=$(cd "$1" && pwd) || exit 1
	if ! ls "$g"/*.gz >/dev/null 2>&1; then
		echo "$g"
		return
	fi
	rm -rf "$w" && mkdir -p "$w"
	for f in "$g"/*; do
		case $f in
		*.gz) gunzip -c "$f" >"$w/$(basename "$f" .gz)" ;;
		*) cp "$f" "$w/" ;;
		esac
	done
	chmod +x "$w"/*
	echo "$w"
}

# s3_list LIST prints the cores of a taskset list ("0-11,14"), one a line.
s3_list() {
	local r
	for r in ${1//,/ }; do
		if [[ $r == *-* ]]; then seq "${r%-*}" "${r#*-}"; else echo "$r"; fi
	done
}

# s3_cpus sets S3_ALL (the cores this shell may use, a taskset list) and
# SERVER_CPUS, CLIENT_CPUS and S3_NCLIENT of the split mode.
s3_cpus() {
	S3_ALL=$(taskset -cp $$ | sed 's/.*: //')
	local all=($(s3_list "$S3_ALL"))
	local n=${#all[@]}
	if [ -z "${SERVER_CPUS:-}" ]; then
		local k=$(((n + 3) / 4))
		SERVER_CPUS=$(echo "${all[@]:n-k}" | tr ' ' ,)
	fi
	local server=" $(s3_list "$SERVER_CPUS" | tr '\n' ' ')" client=() c
	for c in "${all[@]}"; do
		[[ $server == *" $c "* ]] || client+=("$c")
	done
	CLIENT_CPUS=$(echo "${client[@]}" | tr ' ' ,)
	S3_NCLIENT=${#client[@]}
}

# s3_run MODE G OUT ARGS...: one run of zarrremotebench against a fresh
# versitygw, logged to OUT/s3-MODE.txt.
s3_run() {
	local mode=$1 g=$2 out=$3
	shift 3
	local d=/dev/shm/kvik-zarr-s3 srv=() cli=() log=$out/s3-$mode.txt ka=()
	[ "$KEEPALIVE" = 1 ] && ka=(--keep-alive)
	if [ "$mode" = split ]; then
		srv=(taskset -c "$SERVER_CPUS")
		cli=(taskset -c "$CLIENT_CPUS" env GOMAXPROCS="$S3_NCLIENT")
	fi
	mkdir -p "$out" && rm -rf "$d" && mkdir -p "$d/bkt"
	ROOT_ACCESS_KEY=k ROOT_SECRET_KEY=s "${srv[@]}" "$g/versitygw" --port 127.0.0.1:$S3_PORT "${ka[@]}" posix "$d" >"$out/versitygw-$mode.log" 2>&1 &
	S3_GW=$!
	for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$S3_PORT) 2>/dev/null && break; sleep 0.1; done
	{
		case $mode in
		shared) echo "mode shared: versitygw and the bench on cores $S3_ALL (keep-alive $KEEPALIVE)" ;;
		split) echo "mode split: versitygw on cores $SERVER_CPUS, the bench on $CLIENT_CPUS, GOMAXPROCS $S3_NCLIENT (keep-alive $KEEPALIVE)" ;;
		esac
	} | tee "$log"
	AWS_ACCESS_KEY_ID=k AWS_SECRET_ACCESS_KEY=s AWS_DEFAULT_REGION=us-east-1 AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PORT \
		timeout "${S3_TIMEOUT:-300}" "${cli[@]}" "$g/zarrremotebench" -dir "$d/bkt" ${ZRB_ARGS:-} "$@" 2>&1 | tee -a "$log"
	kill "$S3_GW" 2>/dev/null
	wait "$S3_GW" 2>/dev/null
	S3_GW=
	rm -rf "$d"
}

# s3_modes G OUT ARGS...: s3_run in each mode of MODES.
s3_modes() {
	trap '[ -n "${S3_GW:-}" ] && kill "$S3_GW" 2>/dev/null; rm -rf /dev/shm/kvik-zarr-s3 /dev/shm/kvik-zarr-bin' EXIT
	s3_cpus
	local m
	for m in $MODES; do
		s3_run "$m" "$@"
	done
}

# s3_summary OUT: per mode, the reads' GB/s, their ratio to the raw
# array's read and to their own decode ceiling (the same stored chunks
# decoded in memory on the same cores).
s3_summary() {
	local out=$1 m
	for m in $MODES; do
		[ -f "$out/s3-$m.txt" ] || continue
		awk '
NR == 1 { head = $0 }
$1 == "RESULT" { v[$2] = $3 }
function g(k) { return (k in v) ? sprintf("%.2f", v[k]) : "-" }
function r(a, b) { return (a in v) && (b in v) && v[b] > 0 ? sprintf("%.2f", v[a] / v[b]) : "-" }
END {
  print "S3 " head
  printf "  raw object %s GB/s, zarr raw %s (%sx the object)\n", g("s3_raw_object"), g("s3_raw"), r("s3_raw", "s3_raw_object")
  printf "  %-13s %7s %7s %7s %8s\n", "GB/s", "read", "decode", "x raw", "x decode"
  n = split("zstd blosc-lz4 blosc-zstd gzip sharded sharded_whole sharded-zstd", c, " ")
  for (i = 1; i <= n; i++) {
    k = "s3_" c[i]
    printf "  %-13s %7s %7s %7s %8s\n", c[i], g(k), g(k "_decode"), r(k, "s3_raw"), r(k, k "_decode")
  }
  print "  goals (issue 40): x raw >= 0.8, or x decode >= 0.9 where that is lower; gzip x decode >= 0.9; decode: the same stored chunks decoded in memory on the same cores; sharded_whole: sharded through a store opened with zarr.WithWholeShards (zarrremotebench -alt-whole)"
  line = ""; miss = 0
  for (i = 1; i <= n; i++) {
    k = "s3_" c[i]
    if (!(k in v) || !("s3_raw" in v)) continue
    want = 0.8 * v["s3_raw"]
    if ((k "_decode") in v) want = (0.9 * v[k "_decode"] < want || c[i] == "gzip") ? 0.9 * v[k "_decode"] : want
    ok = v[k] >= want; line = line sprintf(" %s %s", c[i], ok ? "ok" : "MISS"); miss += !ok
  }
  printf "  goal check:%s; %d missed\n", line, miss
}' "$out/s3-$m.txt"
	done
}
