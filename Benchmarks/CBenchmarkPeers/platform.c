/// Linux calls the Swift side needs but cannot import cleanly: cpu_set_t is a macro
/// API, and reading /proc through Foundation would allocate inside measured windows.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "CBenchmarkPeers.h"

int bench_pin_current_thread_to_first_cpu(void) {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return -1;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed)) continue;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        return sched_setaffinity(0, sizeof one, &one) == 0 ? cpu : -1;
    }
    errno = EINVAL;
    return -1;
}

int bench_current_cpu(void) {
    return sched_getcpu();
}

int bench_current_tid(void) {
    return gettid();
}

/// Reads a small /proc file into `text` (NUL-terminated) without allocating; false if it
/// cannot be read or is empty.
static int read_proc_file(const char *path, char *text, size_t size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, text, size - 1);
    close(fd);
    if (n <= 0) return 0;
    text[n] = '\0';
    return 1;
}

/// The scheduler state letter of thread `tid` of this process (the field after the
/// command name in /proc/self/task/TID/stat), or 0 if it cannot be read.
static char thread_state(int tid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    char text[512];
    if (!read_proc_file(path, text, sizeof text)) return 0;
    char *end = strrchr(text, ')');
    return end != NULL && end[1] == ' ' ? end[2] : 0;
}

void bench_wait_until_asleep(int tid) {
    // Yielding, not sleeping: the CPU never idles between samples, so no sample starts by
    // waking an idle (halted) vCPU. Bounded, for a target that never sleeps.
    for (int attempt = 0; attempt < 100000; attempt++) {
        char state = thread_state(tid);
        if (state == 'S' || state == 'D' || state == 0) return;
        sched_yield();
    }
}

uint64_t bench_rss_bytes(void) {
    char text[128];
    if (!read_proc_file("/proc/self/statm", text, sizeof text)) return 0;
    // statm: size resident shared text lib data dt, in pages.
    char *cursor = text;
    strtoull(cursor, &cursor, 10);
    uint64_t resident_pages = strtoull(cursor, NULL, 10);
    return resident_pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

int bench_event_new(void) {
    return eventfd(0, EFD_CLOEXEC);
}

void bench_event_signal(int fd) {
    uint64_t one = 1;
    while (write(fd, &one, sizeof one) < 0 && errno == EINTR) {}
}

void bench_event_wait(int fd) {
    uint64_t value;
    while (read(fd, &value, sizeof value) < 0 && errno == EINTR) {}
}

void bench_event_close(int fd) {
    close(fd);
}

bench_responder_cell *bench_responder_cell_create(int *inheritable_descriptor) {
    if (inheritable_descriptor == NULL) {
        void *page = mmap(NULL, sizeof(bench_responder_cell), PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (page == MAP_FAILED) return NULL;
        bench_responder_cell *cell = page;
        cell->cpu = -1;
        cell->answered = 0;
        return cell;
    }
    // No MFD_CLOEXEC: the descriptor is meant to cross exec into the responder.
    int fd = memfd_create("bench-responder-cell", 0);
    if (fd < 0) return NULL;
    if (ftruncate(fd, sizeof(bench_responder_cell)) != 0) {
        close(fd);
        return NULL;
    }
    bench_responder_cell *cell = bench_responder_cell_map(fd);
    if (cell == NULL) {
        close(fd);
        return NULL;
    }
    cell->cpu = -1;
    cell->answered = 0;
    *inheritable_descriptor = fd;
    return cell;
}

bench_responder_cell *bench_responder_cell_map(int descriptor) {
    void *page = mmap(NULL, sizeof(bench_responder_cell), PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0);
    return page == MAP_FAILED ? NULL : page;
}

void bench_responder_cell_unmap(bench_responder_cell *cell) {
    munmap(cell, sizeof(bench_responder_cell));
}

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
void bench_callgrind_toggle_collect(void) { CALLGRIND_TOGGLE_COLLECT; }
#else
void bench_callgrind_toggle_collect(void) {}
#endif
