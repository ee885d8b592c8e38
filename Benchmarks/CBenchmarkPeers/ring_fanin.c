/// The fan-in baseline: `BENCH_FANIN_SENDERS` producer threads into one bounded ring of
/// 64-byte slots, drained by one consumer thread — the C ring's multi-producer variant.
///
/// Several producers need a way to claim slots in turn; a mutex is what a C daemon would
/// reach for, and it keeps the ring honest (no lost slot, no torn publish) without a
/// lock-free MPSC design's own subtleties. Producers write their slot under the lock; the
/// consumer takes the published range under the lock, checks it outside the lock (no
/// producer may reuse a slot until `head` moves past it), then publishes `head`. The
/// consumer sleeps on an eventfd after announcing so under the lock, and a producer that
/// saw the announcement writes the eventfd after unlocking: no wake-up is lost, none is
/// sent to a consumer that is awake. Producers facing a full ring wait on a condition
/// variable the consumer broadcasts after each drained batch.
///
/// Word 0 of every payload is `sender << 48 | n`, so the consumer checks each sender's
/// order separately (`bench_payload_check` covers the other words).

#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>

#include "peer_support.h"

typedef struct fanin_slot {
    _Alignas(64) uint64_t words[BENCH_PAYLOAD_WORDS];
} fanin_slot;

typedef struct fanin_ring fanin_ring;

typedef struct fanin_sender {
    fanin_ring *ring;
    uint64_t index;
    uint64_t sent;           // read by the main thread after join
    pthread_t thread;
} fanin_sender;

struct fanin_ring {
    pthread_mutex_t lock;
    pthread_cond_t not_full;
    uint64_t head, tail;     // under `lock`
    int consumer_sleeping;   // under `lock`
    int producers_waiting;   // under `lock`
    int consumer_fd;         // the consumer's doorbell
    int warm_fd;             // consumer → main: every warm-up message arrived
    pthread_barrier_t start; // the senders and the main thread, after the warm-up
    uint64_t mask;
    fanin_slot *slots;
    const bench_stream_plan *plan;
    uint64_t warmup_each, max_each;
    uint64_t started_ns;     // written by the main thread before the barrier
    // The consumer's, read after join.
    uint64_t expected[BENCH_FANIN_SENDERS];
    uint64_t end_ns;
    const char *failure;
    bench_stream_result *result;
};

static void *fanin_consumer(void *arg) {
    fanin_ring *r = arg;
    uint64_t head = 0;
    uint64_t received = 0;
    int finished_senders = 0;
    uint64_t warmup_total = r->warmup_each * BENCH_FANIN_SENDERS;
    for (;;) {
        pthread_mutex_lock(&r->lock);
        while (r->tail == head) {
            r->consumer_sleeping = 1;
            pthread_mutex_unlock(&r->lock);
            uint64_t ignored;
            bench_read_u64(r->consumer_fd, &ignored);
            pthread_mutex_lock(&r->lock);
        }
        uint64_t tail = r->tail;
        pthread_mutex_unlock(&r->lock);
        for (; head != tail; head++) {
            const uint64_t *words = r->slots[head & r->mask].words;
            uint64_t sender = words[0] >> 48;
            int last = 0;
            if (sender >= BENCH_FANIN_SENDERS ||
                !bench_payload_check(words, (sender << 48) | r->expected[sender], &last)) {
                r->failure = "C eventfd: fan-in consumer read a wrong or out-of-order payload";
                last = 1;
                finished_senders = BENCH_FANIN_SENDERS - 1;
            } else {
                r->expected[sender]++;
            }
            received++;
            if (received == warmup_total) bench_write_u64(r->warm_fd, 1);
            if (last && ++finished_senders == BENCH_FANIN_SENDERS) {
                r->end_ns = bench_now_ns();
                r->result->allocs_end = bench_alloc_snapshot();
                r->result->rss_end = bench_rss_bytes();
                pthread_mutex_lock(&r->lock);
                r->head = head + 1;
                pthread_cond_broadcast(&r->not_full);
                pthread_mutex_unlock(&r->lock);
                return NULL;
            }
        }
        pthread_mutex_lock(&r->lock);
        r->head = head;
        if (r->producers_waiting) pthread_cond_broadcast(&r->not_full);
        pthread_mutex_unlock(&r->lock);
    }
}

static void fanin_push(fanin_ring *r, uint64_t sender, uint64_t n, int last) {
    pthread_mutex_lock(&r->lock);
    while (r->tail - r->head == r->mask + 1 && r->failure == NULL) {
        r->producers_waiting++;
        pthread_cond_wait(&r->not_full, &r->lock);
        r->producers_waiting--;
    }
    bench_payload_fill(r->slots[r->tail & r->mask].words, (sender << 48) | n, last);
    r->tail++;
    int wake = r->consumer_sleeping;
    r->consumer_sleeping = 0;
    pthread_mutex_unlock(&r->lock);
    if (wake) bench_write_u64(r->consumer_fd, 1);
}

static void *fanin_sender_main(void *arg) {
    fanin_sender *s = arg;
    fanin_ring *r = s->ring;
    uint64_t n = 0;
    for (; n < r->warmup_each; n++) fanin_push(r, s->index, n, 0);
    pthread_barrier_wait(&r->start);
    for (;; n++) {
        int last = n + 1 == r->max_each ||
                   ((n & 1023) == 0 && bench_now_ns() - r->started_ns >= r->plan->budget_ns);
        fanin_push(r, s->index, n, last);
        if (last) break;
    }
    s->sent = n + 1;
    return NULL;
}

void bench_ring_fanin(const bench_stream_plan *plan, bench_stream_result *result) {
    *result = (bench_stream_result){ 0 };
    fanin_ring *r = aligned_alloc(64, sizeof *r);
    fanin_slot *slots = aligned_alloc(64, sizeof(fanin_slot) * plan->queue_limit);
    if (r == NULL || slots == NULL) {
        result->failure = "C eventfd: fan-in ring allocation failed";
        return;
    }
    *r = (fanin_ring){ .consumer_fd = eventfd(0, EFD_CLOEXEC), .warm_fd = eventfd(0, EFD_CLOEXEC),
                       .mask = plan->queue_limit - 1, .slots = slots, .plan = plan, .result = result,
                       .warmup_each = plan->warmup / BENCH_FANIN_SENDERS,
                       .max_each = plan->max_messages / BENCH_FANIN_SENDERS };
    if (r->max_each <= r->warmup_each) r->max_each = r->warmup_each + 1;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->not_full, NULL);
    pthread_barrier_init(&r->start, NULL, BENCH_FANIN_SENDERS + 1);
    pthread_t consumer;
    fanin_sender senders[BENCH_FANIN_SENDERS];
    if (r->consumer_fd < 0 || r->warm_fd < 0 || pthread_create(&consumer, NULL, fanin_consumer, r) != 0) {
        result->failure = "C eventfd: fan-in setup failed";
        return;
    }
    for (uint64_t i = 0; i < BENCH_FANIN_SENDERS; i++) {
        senders[i] = (fanin_sender){ .ring = r, .index = i };
        if (pthread_create(&senders[i].thread, NULL, fanin_sender_main, &senders[i]) != 0) {
            result->failure = "C eventfd: fan-in sender thread failed";
            return;
        }
    }
    uint64_t ignored;
    if (r->warmup_each > 0) bench_read_u64(r->warm_fd, &ignored);
    result->allocs_begin = bench_alloc_snapshot();
    result->rss_begin = bench_rss_bytes();
    r->started_ns = bench_now_ns();
    pthread_barrier_wait(&r->start);
    uint64_t sent = 0;
    for (int i = 0; i < BENCH_FANIN_SENDERS; i++) {
        pthread_join(senders[i].thread, NULL);
        sent += senders[i].sent;
    }
    pthread_join(consumer, NULL);
    if (r->failure != NULL) result->failure = r->failure;
    else {
        for (int i = 0; i < BENCH_FANIN_SENDERS; i++)
            if (senders[i].sent != r->expected[i]) result->failure = "C eventfd: fan-in count does not match a sender's";
        result->messages = sent - r->warmup_each * BENCH_FANIN_SENDERS;
        result->elapsed_ns = r->end_ns - r->started_ns;
    }
    close(r->consumer_fd);
    close(r->warm_fd);
    pthread_barrier_destroy(&r->start);
    pthread_cond_destroy(&r->not_full);
    pthread_mutex_destroy(&r->lock);
    free(slots);
    free(r);
}
