/// Ping-pong over an AF_UNIX SOCK_SEQPACKET socketpair between two threads: what a
/// daemon gets from the kernel's own message transport, each packet one 8-byte
/// sequence number, each side blocked in recv(2).

#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "peer_support.h"

typedef struct responder {
    int fd;
    _Atomic int cpu;
    uint64_t handled;
    const char *failure;
} responder;

static int32_t responder_cpu(const void *context) {
    return atomic_load_explicit(&((responder *)context)->cpu, memory_order_relaxed);
}

static void *responder_main(void *arg) {
    responder *r = arg;
    for (uint64_t expected = 1;; expected++) {
        uint64_t value;
        if (bench_seqpacket_recv_u64(bench_seqpacket_blocking_end(r->fd), &value) != 1) {
            r->failure = "C socketpair: responder received a malformed packet";
            bench_seqpacket_send_u64(r->fd, BENCH_POISON_VALUE);
            break;
        }
        if (value == BENCH_STOP_VALUE) break;
        if (value != expected) {
            r->failure = "C socketpair: responder received an out-of-sequence ping";
            bench_seqpacket_send_u64(r->fd, BENCH_POISON_VALUE);
            break;
        }
        atomic_store_explicit(&r->cpu, bench_current_cpu(), memory_order_relaxed);
        r->handled++;
        bench_seqpacket_send_u64(r->fd, value);
    }
    return NULL;
}

void bench_socketpair_pingpong(const bench_latency_plan *plan, bench_latency_result *result) {
    bench_latency_recorder recorder;
    bench_recorder_init(&recorder, plan, result, 2);
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
        result->failure = "C socketpair: socketpair failed";
        return;
    }
    responder r = { .fd = fds[1] };
    pthread_t thread;
    if (pthread_create(&thread, NULL, responder_main, &r) != 0) {
        result->failure = "C socketpair: pthread_create failed";
        return;
    }
    uint64_t sent = bench_seqpacket_initiate(bench_seqpacket_blocking_end(fds[0]), &recorder, responder_cpu, &r, &result->failure);
    bench_seqpacket_send_u64(fds[0], BENCH_STOP_VALUE);
    pthread_join(thread, NULL);
    close(fds[0]);
    close(fds[1]);
    if (r.failure != NULL) result->failure = r.failure;
    else if (result->failure == NULL && r.handled != sent)
        result->failure = "C socketpair: responder count does not match the pings sent";
}
