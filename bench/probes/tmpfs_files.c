// tmpfs_files measures what writing many new files costs a core as more
// threads write at once, outside Go: T threads each save files of
// TF_FILE_KIB in turn (a temporary file created, one pwrite, renamed
// over its name, as a Zarr DirStore saves a chunk), TF_TOTAL_MIB in all,
// into TF_DIR (one subdirectory per 32 files, as chunk rows). The files
// are removed after each run, outside its time. Each line: threads,
// wall time, GB/s written, and the CPU time per 4 KiB page of the
// threads' pwrite calls and of their whole saves (CLOCK_THREAD_CPUTIME).
// If a page costs a core more with 16 writers than with one, the
// kernel's page allocation is contended, and fewer writers cost less.
// TF_MODE=over writes the same files again, in place (their pages
// already allocated; no temporary file, no rename): the copy alone.
//   TF_DIR=/dev/shm/tf   TF_FILE_KIB=416   TF_TOTAL_MIB=2048
//   TF_THREADS=1,2,4,8,16   TF_MODE=new
// Build: gcc -O2 -pthread tmpfs_files.c -o tmpfs_files
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *dir;
static long long fsize, nfiles;
static atomic_llong next;
static int over;

static double clk(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

struct res { double write_cpu, save_cpu; };

static void *saver(void *arg) {
  struct res *r = arg;
  char *buf = malloc(fsize);
  for (long long i = 0; i < fsize; i++) buf[i] = (char)(i * 131 + (long)r);
  char tmp[600], fin[512];
  double c0 = clk(CLOCK_THREAD_CPUTIME_ID), w = 0;
  for (;;) {
    long long i = atomic_fetch_add(&next, 1);
    if (i >= nfiles) break;
    snprintf(fin, sizeof fin, "%s/%lld/%lld", dir, i / 32, i % 32);
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", fin, (long)pthread_self() % 100000);
    int fd = over ? open(fin, O_WRONLY | O_CLOEXEC) : open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) { perror(tmp); exit(1); }
    buf[0] = (char)i;
    double a = clk(CLOCK_THREAD_CPUTIME_ID);
    for (long long done = 0; done < fsize;) {
      ssize_t m = pwrite(fd, buf + done, fsize - done, done);
      if (m <= 0) { perror("pwrite"); exit(1); }
      done += m;
    }
    w += clk(CLOCK_THREAD_CPUTIME_ID) - a;
    close(fd);
    if (!over && rename(tmp, fin)) { perror("rename"); exit(1); }
  }
  r->write_cpu = w;
  r->save_cpu = clk(CLOCK_THREAD_CPUTIME_ID) - c0;
  free(buf);
  return NULL;
}

int main(void) {
  dir = getenv("TF_DIR") ? getenv("TF_DIR") : "/dev/shm/tf";
  fsize = (getenv("TF_FILE_KIB") ? atoll(getenv("TF_FILE_KIB")) : 416) << 10;
  long long total = (getenv("TF_TOTAL_MIB") ? atoll(getenv("TF_TOTAL_MIB")) : 2048) << 20;
  char th[256];
  snprintf(th, sizeof th, "%s", getenv("TF_THREADS") ? getenv("TF_THREADS") : "1,2,4,8,16");
  nfiles = total / fsize;
  over = getenv("TF_MODE") && !strcmp(getenv("TF_MODE"), "over");
  printf("files of %lld KiB, %lld per run, in %s\n", fsize >> 10, nfiles, dir);
  printf("threads  wall_s   GB/s  write_ns/page  save_ns/page\n");
  for (char *s = strtok(th, ","); s; s = strtok(NULL, ",")) {
    int t = atoi(s);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dir, dir);
    if (system(cmd)) return 1;
    for (long long d = 0; d <= nfiles / 32; d++) {
      snprintf(cmd, sizeof cmd, "%s/%lld", dir, d);
      mkdir(cmd, 0755);
    }
    pthread_t ids[256];
    struct res rs[256];
    if (over) { // the files made first, untimed
      over = 0;
      atomic_store(&next, 0);
      for (int i = 0; i < t; i++) pthread_create(&ids[i], NULL, saver, &rs[i]);
      for (int i = 0; i < t; i++) pthread_join(ids[i], NULL);
      over = 1;
    }
    atomic_store(&next, 0);
    double t0 = clk(CLOCK_MONOTONIC);
    for (int i = 0; i < t; i++) pthread_create(&ids[i], NULL, saver, &rs[i]);
    double wc = 0, sc = 0;
    for (int i = 0; i < t; i++) {
      pthread_join(ids[i], NULL);
      wc += rs[i].write_cpu;
      sc += rs[i].save_cpu;
    }
    double wall = clk(CLOCK_MONOTONIC) - t0;
    double pages = (double)nfiles * fsize / 4096;
    printf("%7d %7.3f %6.2f %14.0f %13.0f\n", t, wall, nfiles * fsize / wall / 1e9, wc / pages * 1e9, sc / pages * 1e9);
  }
  snprintf(th, sizeof th, "rm -rf %s", dir);
  return system(th);
}
