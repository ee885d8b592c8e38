/// The C baseline of the `perform` workload: how long from "hand this to that
/// thread" to that thread running, when it is asleep in the kernel. The caller
/// writes an eventfd the target is blocked reading; the target stamps the clock as
/// soon as read(2) returns and acknowledges through a second eventfd, so the caller
/// also sleeps between samples. After each acknowledgement the caller waits until the
/// target is back asleep in read(2) (bench_wait_until_asleep), as the Swift peers' caller
/// does (Wakeups.swift), so every sample wakes a sleeping thread.

#include <pthread.h>
#include <stdatomic.h>
#include <sys/eventfd.h>

#include "peer_support.h"

typedef struct target {
    int wake_fd, ack_fd;
    _Atomic uint64_t woke_ns;   // when the target saw the latest request
    _Atomic int cpu;
    _Atomic int tid;
    uint64_t handled;
    const char *failure;
} target;

static void *target_main(void *arg) {
    target *t = arg;
    atomic_store_explicit(&t->tid, bench_current_tid(), memory_order_relaxed);
    for (uint64_t expected = 1;; expected++) {
        uint64_t value;
        int rc = bench_read_u64(t->wake_fd, &value);
        atomic_store_explicit(&t->woke_ns, bench_now_ns(), memory_order_relaxed);
        if (rc == 0 && value == BENCH_STOP_VALUE) break;
        if (rc != 0 || value != expected) {
            t->failure = "C eventfd: wake-up target received a wrong request";
            bench_write_u64(t->ack_fd, BENCH_POISON_VALUE);
            break;
        }
        atomic_store_explicit(&t->cpu, bench_current_cpu(), memory_order_relaxed);
        t->handled++;
        bench_write_u64(t->ack_fd, value);
    }
    return NULL;
}

void bench_eventfd_wakeup(const bench_latency_plan *plan, bench_latency_result *result) {
    bench_latency_recorder recorder;
    bench_recorder_init(&recorder, plan, result, 1);
    target t = { .wake_fd = eventfd(0, EFD_CLOEXEC), .ack_fd = eventfd(0, EFD_CLOEXEC) };
    pthread_t thread;
    if (t.wake_fd < 0 || t.ack_fd < 0 || pthread_create(&thread, NULL, target_main, &t) != 0) {
        result->failure = "C eventfd: setup failed";
        return;
    }
    uint64_t sent = 0;
    for (uint64_t seq = 1;; seq++) {
        int cpu = bench_current_cpu();
        uint64_t t0 = bench_now_ns();
        bench_write_u64(t.wake_fd, seq);
        sent = seq;
        uint64_t value;
        if (bench_read_u64(t.ack_fd, &value) != 0 || value != seq) {
            result->failure = "C eventfd: wake-up caller received a wrong acknowledgement";
            break;
        }
        uint64_t woke = atomic_load_explicit(&t.woke_ns, memory_order_relaxed);
        int same = cpu == atomic_load_explicit(&t.cpu, memory_order_relaxed);
        if (!bench_recorder_add(&recorder, woke - t0, same, bench_now_ns())) break;
        bench_wait_until_asleep(atomic_load_explicit(&t.tid, memory_order_relaxed));
    }
    bench_write_u64(t.wake_fd, BENCH_STOP_VALUE);
    pthread_join(thread, NULL);
    close(t.wake_fd);
    close(t.ack_fd);
    if (t.failure != NULL) result->failure = t.failure;
    else if (result->failure == NULL && t.handled != sent)
        result->failure = "C eventfd: wake-up target count does not match the requests sent";
}
