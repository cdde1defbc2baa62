// falloc_write measures what a save's parallel writes of a new file cost
// with and without the file's blocks allocated first, outside Go: T
// threads pwrite a new file of SIZE bytes in TASK-byte tasks (taken in
// order from a shared counter), with O_DIRECT or buffered, then fsync it;
// with fallocate, the file's size is reserved first (mode 0: unwritten
// extents on ext4, inside the file's size). ext4 takes the inode lock
// exclusively for an O_DIRECT write that extends the file, so without
// the reservation the writers of a new file go one at a time.
//   FW_SIZE_MIB=8192   file size
//   FW_TASK_MIB=8      task size
//   FW_THREADS=16,32   thread counts
//   FW_DIR=/root       where the file goes (removed after each run)
// Each line: mode, threads, time to write, to fsync, GB/s overall.
// Build: gcc -O2 -pthread falloc_write.c -o falloc_write
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long size, task;
static int fd;
static atomic_llong next;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static void *writer(void *arg) {
  char *buf;
  if (posix_memalign((void **)&buf, 4096, task)) exit(1);
  for (long long i = 0; i < task; i++) buf[i] = (char)(i * 7 + (long)arg);
  for (;;) {
    long long off = atomic_fetch_add(&next, task);
    if (off >= size) break;
    long long n = size - off < task ? size - off : task;
    for (long long done = 0; done < n;) {
      ssize_t m = pwrite(fd, buf + done, n - done, off + done);
      if (m <= 0) { perror("pwrite"); exit(1); }
      done += m;
    }
  }
  free(buf);
  return NULL;
}

static long long env(const char *k, long long d) {
  const char *v = getenv(k);
  return v ? atoll(v) : d;
}

int main(void) {
  size = env("FW_SIZE_MIB", 8192) << 20;
  task = env("FW_TASK_MIB", 8) << 20;
  const char *dir = getenv("FW_DIR") ? getenv("FW_DIR") : "/root";
  char threads[256];
  snprintf(threads, sizeof threads, "%s", getenv("FW_THREADS") ? getenv("FW_THREADS") : "16,32");
  char path[4096];
  snprintf(path, sizeof path, "%s/falloc_write.tmp", dir);
  const char *modes[] = {"direct", "direct+fallocate", "buffered", "buffered+fallocate"};
  for (char *s = strtok(threads, ","); s; s = strtok(NULL, ",")) {
    int t = atoi(s);
    for (int m = 0; m < 4; m++) {
      unlink(path);
      fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | (m < 2 ? O_DIRECT : 0), 0644);
      if (fd < 0) { perror("open"); return 1; }
      double t0 = now();
      if ((m & 1) && fallocate(fd, 0, 0, size)) { perror("fallocate"); return 1; }
      atomic_store(&next, 0);
      pthread_t th[256];
      for (int i = 0; i < t && i < 256; i++) pthread_create(&th[i], NULL, writer, (void *)(long)i);
      for (int i = 0; i < t && i < 256; i++) pthread_join(th[i], NULL);
      double t1 = now();
      fsync(fd);
      double t2 = now();
      close(fd);
      printf("%-20s T=%-3d write %6.3f s  fsync %6.3f s  %5.2f GB/s\n", modes[m], t, t1 - t0, t2 - t1, size / (t2 - t0) / 1e9);
      fflush(stdout);
    }
  }
  unlink(path);
  return 0;
}
