/// The baseline every ping-pong row is compared with: two threads, each blocked in
/// read(2) on its own eventfd, handing an 8-byte value back and forth. Nothing sits
/// between the two threads but the kernel's wait queue.

#include <pthread.h>
#include <stdatomic.h>
#include <sys/eventfd.h>

#include "peer_support.h"

typedef struct responder {
    int ping_fd, pong_fd;
    _Atomic int cpu;         // where the responder ran for the latest ping
    uint64_t handled;        // pings verified and answered
    const char *failure;
} responder;

static void *responder_main(void *arg) {
    responder *r = arg;
    for (uint64_t expected = 1;; expected++) {
        uint64_t value;
        if (bench_read_u64(r->ping_fd, &value) != 0) {
            r->failure = "C eventfd: responder read failed";
            break;
        }
        if (value == BENCH_STOP_VALUE) break;
        if (value != expected) {
            r->failure = "C eventfd: responder received an out-of-sequence ping";
            bench_write_u64(r->pong_fd, BENCH_POISON_VALUE);
            break;
        }
        atomic_store_explicit(&r->cpu, bench_current_cpu(), memory_order_relaxed);
        r->handled++;
        bench_write_u64(r->pong_fd, value);
    }
    return NULL;
}

void bench_eventfd_pingpong(const bench_latency_plan *plan, bench_latency_result *result) {
    bench_latency_recorder recorder;
    bench_recorder_init(&recorder, plan, result, 2);
    responder r = { .ping_fd = eventfd(0, EFD_CLOEXEC), .pong_fd = eventfd(0, EFD_CLOEXEC) };
    pthread_t thread;
    if (r.ping_fd < 0 || r.pong_fd < 0 || pthread_create(&thread, NULL, responder_main, &r) != 0) {
        result->failure = "C eventfd: setup failed";
        return;
    }
    uint64_t sent = 0;
    for (uint64_t seq = 1;; seq++) {
        uint64_t t0 = bench_now_ns();
        bench_write_u64(r.ping_fd, seq);
        sent = seq;
        uint64_t value;
        int rc = bench_read_u64(r.pong_fd, &value);
        uint64_t t1 = bench_now_ns();
        if (rc != 0 || value != seq) {
            result->failure = "C eventfd: initiator received a wrong pong";
            break;
        }
        int same = bench_current_cpu() == atomic_load_explicit(&r.cpu, memory_order_relaxed);
        if (!bench_recorder_add(&recorder, t1 - t0, same, t1)) break;
    }
    bench_write_u64(r.ping_fd, BENCH_STOP_VALUE);
    pthread_join(thread, NULL);
    close(r.ping_fd);
    close(r.pong_fd);
    if (r.failure != NULL) result->failure = r.failure;
    else if (result->failure == NULL && r.handled != sent)
        result->failure = "C eventfd: responder count does not match the pings sent";
}
