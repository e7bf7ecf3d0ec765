/*
 * Microbenchmarks behind docs/PERFORMANCE.md's same-host single-copy notes
 * (not built by configure; one process forks the other, each pinned):
 *
 *   cc -O2 -o /tmp/cma_micro tools/bench/cma_micro.c
 *   /tmp/cma_micro call SIZE ITERS        process_vm_readv of one reused
 *                                         buffer vs memcpy of it
 *   /tmp/cma_micro split SIZE COUNT ITERS receiver reads COUNT messages of
 *                                         SIZE alone, then reads the first
 *                                         halves while the sender writes the
 *                                         second halves (process_vm_writev)
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu % (int)sysconf(_SC_NPROCESSORS_ONLN), &s);
    sched_setaffinity(0, sizeof(s), &s);
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static int call_cost(size_t size, int iters) {
    char *src = aligned_alloc(4096, size), *dst = aligned_alloc(4096, size);
    memset(src, 1, size);
    memset(dst, 2, size);
    pid_t child = fork();
    if (child == 0) {
        pin(1);
        pause();
        _exit(0);
    }
    pin(0);
    usleep(20000);
    double t0 = now();
    for (int i = 0; i < iters; ++i) {
        struct iovec l = {dst, size}, r = {src, size};
        if (process_vm_readv(child, &l, 1, &r, 1, 0) != (ssize_t)size) die("process_vm_readv");
    }
    double tr = now() - t0;
    t0 = now();
    for (int i = 0; i < iters; ++i) {
        memcpy(dst, src, size);
        __asm__ volatile("" : : "r"(dst) : "memory");
    }
    double tm = now() - t0;
    printf("%zu B: process_vm_readv %.2f us (%.1f GiB/s), memcpy %.2f us (%.1f GiB/s)\n",
           size, tr / iters * 1e6, (double)size * iters / tr / (1 << 30),
           tm / iters * 1e6, (double)size * iters / tm / (1 << 30));
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return 0;
}

static double split_run(size_t size, int count, int iters, int split) {
    size_t total = size * (size_t)count;
    struct ctl { _Atomic long go, done; } *c =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (c == MAP_FAILED) die("mmap");
    char *src = malloc(total), *dst = malloc(total);  /* same addresses after fork */
    memset(src, 1, total);
    memset(dst, 2, total);
    size_t half = split ? size / 2 : size;
    pid_t parent = getpid(), child = fork();
    if (child == 0) {  /* sender: owns src, writes the second halves */
        pin(1);
        for (long it = 1; it <= iters; ++it) {
            while (atomic_load(&c->go) < it) {}
            for (int m = 0; split && m < count; ++m) {
                struct iovec l = {src + m * size + half, size - half};
                struct iovec r = {dst + m * size + half, size - half};
                if (process_vm_writev(parent, &l, 1, &r, 1, 0) != (ssize_t)(size - half))
                    die("process_vm_writev");
            }
            atomic_fetch_add(&c->done, 1);
        }
        pause();
        _exit(0);
    }
    pin(0);
    usleep(20000);
    double t0 = 0;
    for (long it = 1; it <= iters; ++it) {
        if (it == 2) t0 = now();  /* first round warms up */
        atomic_store(&c->go, it);
        for (int m = 0; m < count; ++m) {
            struct iovec l = {dst + m * size, half}, r = {src + m * size, half};
            if (process_vm_readv(child, &l, 1, &r, 1, 0) != (ssize_t)half) die("process_vm_readv");
        }
        while (atomic_load(&c->done) < it) {}
    }
    double t = now() - t0;
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    free(src);
    free(dst);
    munmap(c, 4096);
    return (double)total * (iters - 1) / t / (1 << 30);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "call") == 0) {
        return call_cost((size_t)atol(argv[2]), atoi(argv[3]));
    }
    if (argc == 5 && strcmp(argv[1], "split") == 0) {
        size_t size = (size_t)atol(argv[2]);
        int count = atoi(argv[3]), iters = atoi(argv[4]);
        if (size < 2 || count < 1 || iters < 2) {
            fprintf(stderr, "bad arguments\n");
            return 2;
        }
        double alone = split_run(size, count, iters, 0);
        double both = split_run(size, count, iters, 1);
        printf("%zu B x %d: receiver alone %.2f GiB/s, split %.2f GiB/s (%.2fx)\n",
               size, count, alone, both, both / alone);
        return 0;
    }
    fprintf(stderr, "usage: %s call SIZE ITERS | split SIZE COUNT ITERS\n", argv[0]);
    return 2;
}
