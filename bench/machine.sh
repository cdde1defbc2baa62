# Sourced by the Zarr GPU-machine scripts: machine_info prints what tells
# two lent machines apart, one item a line. Their CPUs above all: the
# same decode ceiling ran 4.97 GB/s on one H200 machine and 6.6-7.7 on
# another (bench/results/zarr-h200-2026-11-28-eleventh), so a ratio is
# read within one call and a figure beside the CPU it ran on.
machine_info() {
	echo "cores: $(nproc)"
	lscpu 2>/dev/null | sed -n 's/^Model name: *\(.*\)/cpu: \1/p; s/^Socket(s): *\(.*\)/sockets: \1/p; s/^NUMA node(s): *\(.*\)/numa nodes: \1/p; s/^L3 cache: *\(.*\)/L3: \1/p'
	echo "kernel: $(uname -r)"
	awk '/^MemTotal/ { printf "memory: %.0f GiB\n", $2 / 1048576 }' /proc/meminfo
	if command -v nvidia-smi >/dev/null; then
		nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
	else
		echo "gpu: none (no nvidia-smi)"
	fi
}
