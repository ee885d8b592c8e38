/// One-way stream of 64-byte packets over an AF_UNIX SOCK_SEQPACKET socketpair:
/// blocking send(2) on one thread, blocking recv(2) on the other. The socket's send
/// buffer is the bounded queue; the kernel wakes whichever side is waiting.

#include <pthread.h>
#include <sys/socket.h>

#include "peer_support.h"

typedef struct consumer {
    int fd;
    uint64_t received;
    uint64_t end_ns;
    bench_stream_result *result;
    const char *failure;
} consumer;

static void *consumer_main(void *arg) {
    consumer *c = arg;
    for (uint64_t seq = 0;; seq++) {
        uint64_t words[BENCH_PAYLOAD_WORDS];
        ssize_t n;
        while ((n = recv(c->fd, words, sizeof words, MSG_TRUNC)) < 0 && errno == EINTR) {}
        int last = 0;
        if (n != BENCH_PAYLOAD_BYTES || !bench_payload_check(words, seq, &last)) {
            c->failure = "C socketpair: consumer received a wrong packet";
            // Unblocks a producer stuck on a full socket buffer: its sends now fail.
            shutdown(c->fd, SHUT_RDWR);
            return NULL;
        }
        c->received = seq + 1;
        if (last) {
            c->end_ns = bench_now_ns();
            c->result->allocs_end = bench_alloc_snapshot();
            c->result->rss_end = bench_rss_bytes();
            return NULL;
        }
    }
}

void bench_socketpair_throughput(const bench_stream_plan *plan, bench_stream_result *result) {
    *result = (bench_stream_result){ 0 };
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
        result->failure = "C socketpair: socketpair failed";
        return;
    }
    consumer c = { .fd = fds[1], .result = result };
    pthread_t thread;
    if (pthread_create(&thread, NULL, consumer_main, &c) != 0) {
        result->failure = "C socketpair: pthread_create failed";
        return;
    }
    uint64_t started = 0;
    uint64_t sent = 0;
    for (uint64_t seq = 0;; seq++) {
        int last = bench_stream_step(plan, result, seq, &started);
        uint64_t words[BENCH_PAYLOAD_WORDS];
        bench_payload_fill(words, seq, last);
        ssize_t n;
        while ((n = send(fds[0], words, sizeof words, MSG_NOSIGNAL)) < 0 && errno == EINTR) {}
        if (n != BENCH_PAYLOAD_BYTES) break;
        sent = seq + 1;
        if (last) break;
    }
    pthread_join(thread, NULL);
    close(fds[0]);
    close(fds[1]);
    if (c.failure != NULL) result->failure = c.failure;
    else if (c.received != sent) result->failure = "C socketpair: consumer count does not match";
    else {
        result->messages = sent - plan->warmup;
        result->elapsed_ns = c.end_ns - started;
    }
}
