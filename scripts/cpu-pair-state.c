/*
 * Which state the host has put this VM's CPU pair in: the cache-line round trip between two CPUs
 * and the bandwidth of rewriting memory that the other CPU has just read (what a shared-memory
 * collective does every round), beside rewriting private memory. On the 2-vCPU KVM guest of
 * docs/PERFORMANCE.md it flips between ~110 ns / ~20-27 GB/s ("near") and ~500 ns / ~2.5 GB/s
 * ("far") every few seconds to minutes, whatever runs in the guest.
 * Build and run: scripts/cpu-pair-state.sh [CPU_A CPU_B]
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}

int main(int argc, char **argv) {
    int a = argc > 2 ? atoi(argv[1]) : 0, b = argc > 2 ? atoi(argv[2]) : 1;
    const int trips = 200000, passes = 50;
    const long size = 4L << 20;
    /* flags: [0] ping, [16] pong, [32] "written", [48] "read" (each on its own 128-byte pair) */
    volatile long *flag = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    char *shared = mmap(0, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (flag == MAP_FAILED || shared == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    memset(shared, 0, size);
    pid_t child = fork();
    if (child == 0) {
        pin(b);
        for (long i = 1; i <= trips; i++) {
            while (flag[0] != i) {
            }
            flag[16] = i;
        }
        char *dst = malloc(size);
        memset(dst, 0, size);
        for (long k = 1; k <= passes; k++) {
            while (flag[32] != k) {
            }
            memcpy(dst, shared, size); /* read what the other CPU wrote */
            __sync_synchronize();
            flag[48] = k;
        }
        _exit(0);
    }
    pin(a);
    double t0 = now();
    for (long i = 1; i <= trips; i++) {
        flag[0] = i;
        while (flag[16] != i) {
        }
    }
    double rtt = (now() - t0) / trips;
    char *src = malloc(size), *own = malloc(size);
    memset(src, 3, size);
    memset(own, 0, size);
    double tPrivate = 0, tShared = 0;
    for (long k = 1; k <= passes; k++) {
        double s = now();
        memcpy(own, src, size);
        tPrivate += now() - s;
    }
    for (long k = 1; k <= passes; k++) {
        double s = now();
        memcpy(shared, src, size); /* lines the other CPU read in the previous pass */
        tShared += now() - s;
        flag[32] = k;
        while (flag[48] != k) {
        }
    }
    waitpid(child, 0, 0);
    printf("cpus %d-%d: cache-line round trip %.0f ns; rewriting 4 MiB the other cpu read %.1f GB/s, private %.1f GB/s\n", a, b,
           rtt * 1e9, passes * (double) size / tShared / 1e9, passes * (double) size / tPrivate / 1e9);
    return 0;
}
