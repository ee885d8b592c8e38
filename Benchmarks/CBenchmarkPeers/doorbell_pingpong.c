/// The kernel floors under RunLoopKit's two ways to sleep, as `pingpong` reference rows.
///
/// A run loop does not read its messages from the descriptor it sleeps on: a message sits in
/// memory (a port's queue) and a doorbell wakes the loop that should look. RunLoopKit rings one
/// of two doorbells. A loop whose mode has nothing the kernel must watch sleeps on a futex word
/// (Kernel/Futex.swift); a loop with descriptors in its mode — the `idle` row's 100 fd sources —
/// must sleep in epoll_wait(2), woken by an eventfd registered edge-triggered and never read
/// (Kernel/EventFD.swift). The `idle` bar compares the second with the first, so the kernel's
/// difference between the two sleeps is inside its ratio; these rows measure that difference
/// with no run loop around it:
///
/// - **C futex**: each thread's mailbox is a futex word, 0 while its owner may sleep and 1 once
///   posted. The owner resets it before it looks at the mailbox and sleeps in FUTEX_WAIT_PRIVATE
///   only if the mailbox is empty; a sender fills the mailbox, stores 1 and FUTEX_WAKE_PRIVATEs
///   (RunLoopKit's `Futex.post`, unconditional as there).
/// - **C eventfd + epoll**: each thread sleeps in epoll_wait on a set holding its doorbell
///   eventfd (EPOLLET, never read: every write is a new edge) and `BENCH_IDLE_DESCRIPTORS`
///   eventfds nobody writes (level-triggered, as a readable descriptor source is); a sender
///   fills the mailbox and writes 1 to the doorbell.
///
/// The payload is the 8-byte sequence number in the mailbox; each side checks every one, and
/// a wake-up for an idle descriptor fails the run.

#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>

#include "peer_support.h"

/// The tag of a thread's doorbell in its epoll set; idle descriptor k has tag k + 1.
#define DOORBELL_TAG UINT64_C(0)
/// As many events as one epoll_wait of RunLoopKit's takes (Kernel/Epoll.swift).
#define EPOLL_BATCH 64

/// One thread's side of the exchange: the mailbox others post to, and how its owner sleeps.
typedef struct mailbox {
    _Atomic uint64_t value;        // 0 when empty; otherwise the message (sequence number)
    int through_epoll;
    _Atomic uint32_t futex_word;   // futex: 0 = its owner may sleep, 1 = posted
    int doorbell, epfd;            // eventfd + epoll: the doorbell and the epoll set
    int idle[BENCH_IDLE_DESCRIPTORS];
} mailbox;

static long futex(_Atomic uint32_t *word, int op, uint32_t value) {
    return syscall(SYS_futex, (uint32_t *)word, op, value, NULL, NULL, 0);
}

/// Builds the mailbox's doorbell; returns 0 when a descriptor or the epoll set failed.
static int mailbox_open(mailbox *m, int through_epoll) {
    *m = (mailbox){ .through_epoll = through_epoll, .doorbell = -1, .epfd = -1 };
    for (int k = 0; k < BENCH_IDLE_DESCRIPTORS; k++) m->idle[k] = -1;
    if (!through_epoll) return 1;
    m->epfd = epoll_create1(EPOLL_CLOEXEC);
    m->doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (m->epfd < 0 || m->doorbell < 0) return 0;
    struct epoll_event bell = { .events = EPOLLIN | EPOLLET, .data.u64 = DOORBELL_TAG };
    if (epoll_ctl(m->epfd, EPOLL_CTL_ADD, m->doorbell, &bell) != 0) return 0;
    for (int k = 0; k < BENCH_IDLE_DESCRIPTORS; k++) {
        m->idle[k] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        struct epoll_event idle = { .events = EPOLLIN, .data.u64 = (uint64_t)k + 1 };
        if (m->idle[k] < 0 || epoll_ctl(m->epfd, EPOLL_CTL_ADD, m->idle[k], &idle) != 0) return 0;
    }
    return 1;
}

static void mailbox_close(mailbox *m) {
    if (m->epfd >= 0) close(m->epfd);
    if (m->doorbell >= 0) close(m->doorbell);
    for (int k = 0; k < BENCH_IDLE_DESCRIPTORS; k++)
        if (m->idle[k] >= 0) close(m->idle[k]);
}

/// Any thread: leaves `value` (never 0) in the mailbox and rings its owner's doorbell.
static void mailbox_post(mailbox *m, uint64_t value) {
    atomic_store_explicit(&m->value, value, memory_order_seq_cst);
    if (m->through_epoll) {
        bench_write_u64(m->doorbell, 1);
    } else {
        atomic_store_explicit(&m->futex_word, 1, memory_order_seq_cst);
        futex(&m->futex_word, FUTEX_WAKE_PRIVATE, 1);
    }
}

/// The owner: takes the next message, sleeping while the mailbox is empty. Returns 0 and sets
/// `*failure` when the sleep failed or an idle descriptor woke it.
static int mailbox_take(mailbox *m, uint64_t *value, const char **failure) {
    for (;;) {
        // Reset before looking, so a post that lands after the look makes the wait return.
        if (!m->through_epoll) atomic_store_explicit(&m->futex_word, 0, memory_order_seq_cst);
        uint64_t v = atomic_exchange_explicit(&m->value, 0, memory_order_seq_cst);
        if (v != 0) {
            *value = v;
            return 1;
        }
        if (!m->through_epoll) {
            if (futex(&m->futex_word, FUTEX_WAIT_PRIVATE, 0) != 0 && errno != EAGAIN && errno != EINTR) {
                *failure = "C futex: FUTEX_WAIT failed";
                return 0;
            }
            continue;
        }
        struct epoll_event events[EPOLL_BATCH];
        int ready = epoll_wait(m->epfd, events, EPOLL_BATCH, -1);
        if (ready < 0 && errno != EINTR) {
            *failure = "C eventfd + epoll: epoll_wait failed";
            return 0;
        }
        for (int k = 0; k < ready; k++) {
            if (events[k].data.u64 != DOORBELL_TAG) {
                *failure = "C eventfd + epoll: an idle eventfd woke the thread";
                return 0;
            }
        }
    }
}

typedef struct exchange {
    mailbox ping, pong;      // the responder's and the initiator's
    _Atomic int cpu;         // where the responder ran for the latest ping
    uint64_t handled;        // pings verified and answered
    const char *failure;
} exchange;

static void *responder_main(void *arg) {
    exchange *x = arg;
    for (uint64_t expected = 1;; expected++) {
        uint64_t value;
        if (!mailbox_take(&x->ping, &value, &x->failure)) {
            mailbox_post(&x->pong, BENCH_POISON_VALUE);
            break;
        }
        if (value == BENCH_STOP_VALUE) break;
        if (value != expected) {
            x->failure = x->ping.through_epoll ? "C eventfd + epoll: responder received an out-of-sequence ping"
                                               : "C futex: responder received an out-of-sequence ping";
            mailbox_post(&x->pong, BENCH_POISON_VALUE);
            break;
        }
        atomic_store_explicit(&x->cpu, bench_current_cpu(), memory_order_relaxed);
        x->handled++;
        mailbox_post(&x->pong, value);
    }
    return NULL;
}

static void doorbell_pingpong(const bench_latency_plan *plan, bench_latency_result *result, int through_epoll) {
    bench_latency_recorder recorder;
    bench_recorder_init(&recorder, plan, result, 2);
    exchange x = { .cpu = -1 };
    // Both opened (not &&), so that both can be closed whatever failed.
    int opened = mailbox_open(&x.ping, through_epoll) & mailbox_open(&x.pong, through_epoll);
    pthread_t thread;
    if (!opened || pthread_create(&thread, NULL, responder_main, &x) != 0) {
        mailbox_close(&x.ping);
        mailbox_close(&x.pong);
        result->failure = through_epoll ? "C eventfd + epoll: setup failed" : "C futex: setup failed";
        return;
    }
    uint64_t sent = 0;
    for (uint64_t seq = 1;; seq++) {
        uint64_t t0 = bench_now_ns();
        mailbox_post(&x.ping, seq);
        sent = seq;
        uint64_t value = 0;
        int took = mailbox_take(&x.pong, &value, &result->failure);
        uint64_t t1 = bench_now_ns();
        if (!took) break;
        if (value != seq) {
            result->failure = through_epoll ? "C eventfd + epoll: initiator received a wrong pong"
                                            : "C futex: initiator received a wrong pong";
            break;
        }
        int same = bench_current_cpu() == atomic_load_explicit(&x.cpu, memory_order_relaxed);
        if (!bench_recorder_add(&recorder, t1 - t0, same, t1)) break;
    }
    mailbox_post(&x.ping, BENCH_STOP_VALUE);
    pthread_join(thread, NULL);
    mailbox_close(&x.ping);
    mailbox_close(&x.pong);
    if (x.failure != NULL) result->failure = x.failure;
    else if (result->failure == NULL && x.handled != sent)
        result->failure = through_epoll ? "C eventfd + epoll: responder count does not match the pings sent"
                                        : "C futex: responder count does not match the pings sent";
}

void bench_futex_pingpong(const bench_latency_plan *plan, bench_latency_result *result) {
    doorbell_pingpong(plan, result, 0);
}

void bench_eventfd_epoll_pingpong(const bench_latency_plan *plan, bench_latency_result *result) {
    doorbell_pingpong(plan, result, 1);
}
