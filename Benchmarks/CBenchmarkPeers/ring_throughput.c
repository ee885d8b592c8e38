/// The throughput baseline: a bounded single-producer single-consumer ring of 64-byte
/// slots, the cheapest honest queue between two threads that sleep when idle.
///
/// The consumer drains every published slot, then announces it may sleep and re-reads
/// the tail before blocking on its eventfd; the producer publishes a slot and then
/// reads the announcement, and writes the eventfd only if the consumer may be asleep.
/// Symmetrically, a producer facing a full ring sleeps on a second eventfd that the
/// consumer writes after draining the batch it saw (so a full ring costs one wake-up
/// per ring's worth of messages, not one per slot). Each handshake is a Dekker pair of
/// sequentially consistent operations, so no wake-up is lost and none is wasted.

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/eventfd.h>

#include "peer_support.h"

typedef struct slot {
    _Alignas(64) uint64_t words[BENCH_PAYLOAD_WORDS];
} slot;

typedef struct ring {
    _Alignas(64) _Atomic uint64_t head;         // next slot the consumer reads
    _Alignas(64) _Atomic uint64_t tail;         // next slot the producer writes
    _Alignas(64) _Atomic int consumer_sleeping;
    _Alignas(64) _Atomic int producer_sleeping;
    int consumer_fd, producer_fd;
    uint64_t mask;
    slot *slots;
    // Written by the consumer, read after join.
    uint64_t received;
    uint64_t end_ns;
    bench_stream_result *result;
    _Atomic(const char *) failure;
} ring;

static void *consumer_main(void *arg) {
    ring *r = arg;
    uint64_t head = 0;
    for (;;) {
        uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
        while (head == tail) {
            atomic_store(&r->consumer_sleeping, 1);
            tail = atomic_load(&r->tail);
            if (head == tail) {
                uint64_t ignored;
                bench_read_u64(r->consumer_fd, &ignored);
                tail = atomic_load_explicit(&r->tail, memory_order_acquire);
            }
            atomic_store_explicit(&r->consumer_sleeping, 0, memory_order_relaxed);
        }
        int last = 0;
        for (; head != tail; head++) {
            if (!bench_payload_check(r->slots[head & r->mask].words, head, &last)) {
                atomic_store(&r->failure, "C eventfd: ring consumer read a wrong payload");
                last = 1;
            }
            if (last) {
                head++;
                break;
            }
        }
        atomic_store(&r->head, head);
        if (last) {
            r->end_ns = bench_now_ns();
            r->result->allocs_end = bench_alloc_snapshot();
            r->result->rss_end = bench_rss_bytes();
            r->received = head;
            // A producer blocked on a full ring after a failure must not hang.
            bench_write_u64(r->producer_fd, 1);
            return NULL;
        }
        if (atomic_load(&r->producer_sleeping) && atomic_exchange(&r->producer_sleeping, 0)) {
            bench_write_u64(r->producer_fd, 1);
        }
    }
}

void bench_ring_throughput(const bench_stream_plan *plan, bench_stream_result *result) {
    *result = (bench_stream_result){ 0 };
    ring *r = aligned_alloc(64, sizeof *r);
    slot *slots = aligned_alloc(64, sizeof(slot) * plan->queue_limit);
    if (r == NULL || slots == NULL) {
        result->failure = "C eventfd: ring allocation failed";
        return;
    }
    *r = (ring){ .consumer_fd = eventfd(0, EFD_CLOEXEC), .producer_fd = eventfd(0, EFD_CLOEXEC),
                 .mask = plan->queue_limit - 1, .slots = slots, .result = result };
    pthread_t thread;
    if (r->consumer_fd < 0 || r->producer_fd < 0 || pthread_create(&thread, NULL, consumer_main, r) != 0) {
        result->failure = "C eventfd: ring setup failed";
        return;
    }
    uint64_t capacity = plan->queue_limit;
    uint64_t started = 0;
    uint64_t sent = 0;
    for (uint64_t seq = 0;; seq++) {
        int last = bench_stream_step(plan, result, seq, &started);
        while (seq - atomic_load_explicit(&r->head, memory_order_acquire) == capacity) {
            atomic_store(&r->producer_sleeping, 1);
            if (seq - atomic_load(&r->head) == capacity) {
                uint64_t ignored;
                bench_read_u64(r->producer_fd, &ignored);
            }
            atomic_store_explicit(&r->producer_sleeping, 0, memory_order_relaxed);
            if (atomic_load(&r->failure) != NULL) break;
        }
        if (atomic_load(&r->failure) != NULL) break;
        bench_payload_fill(r->slots[seq & r->mask].words, seq, last);
        atomic_store(&r->tail, seq + 1);
        sent = seq + 1;
        if (atomic_load(&r->consumer_sleeping) && atomic_exchange(&r->consumer_sleeping, 0))
            bench_write_u64(r->consumer_fd, 1);
        if (last) break;
    }
    pthread_join(thread, NULL);
    if (atomic_load(&r->failure) != NULL) result->failure = atomic_load(&r->failure);
    else if (r->received != sent) result->failure = "C eventfd: ring consumer count does not match";
    else {
        result->messages = sent - plan->warmup;
        result->elapsed_ns = r->end_ns - started;
    }
    close(r->consumer_fd);
    close(r->producer_fd);
    free(slots);
    free(r);
}
