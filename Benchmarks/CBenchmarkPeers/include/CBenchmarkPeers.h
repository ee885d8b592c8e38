#ifndef CBENCHMARKPEERS_H
#define CBENCHMARKPEERS_H

/// The C side of the benchmarks: the C peers every Swift row is compared with, the
/// process-wide allocation counter, and the few Linux calls whose macros Swift cannot
/// import (cpu_set_t, CF's run-loop wake-up).
///
/// Every peer verifies what it receives and reports a failure string instead of a
/// number when anything is wrong, so no row can be fast by being wrong.

#include <stddef.h>
#include <stdint.h>
#include <time.h>

// ---- Clock --------------------------------------------------------------------

/// CLOCK_MONOTONIC in nanoseconds. Every peer, C or Swift, stamps with this one
/// function so that the cost of reading the clock is the same in every row.
static inline uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// ---- Allocation counter (alloc_counter.c) -------------------------------------

/// Allocations and bytes requested since the process started, counted by this
/// target's malloc/calloc/realloc/memalign family, which interposes glibc's for
/// the whole process (Swift runtime, Foundation, Dispatch and NIO included).
typedef struct bench_alloc_counts {
    uint64_t allocations;
    uint64_t bytes;
} bench_alloc_counts;

bench_alloc_counts bench_alloc_snapshot(void);

// ---- Platform (platform.c) ------------------------------------------------------

/// Restricts the calling thread to the lowest CPU it may run on (CPU 0 on an
/// unrestricted machine). Threads created afterwards inherit the mask. Returns the
/// CPU, or -1 with errno set.
int bench_pin_current_thread_to_first_cpu(void);

/// The CPU the calling thread is running on (sched_getcpu), -1 if unknown.
int bench_current_cpu(void);

/// The calling thread's kernel thread id (gettid).
int bench_current_tid(void);

/// Returns once thread `tid` of this process is asleep in the kernel (state S or D in
/// /proc), yielding the CPU meanwhile: the `perform` workload calls it between samples so
/// that every sample wakes a sleeping target, whatever its framework does after a block.
void bench_wait_until_asleep(int tid);

/// Turns callgrind's event collection on or off (CALLGRIND_TOGGLE_COLLECT) when the process
/// runs under `valgrind --tool=callgrind`; a no-op otherwise, and where valgrind's headers were
/// missing at build time. The churn workload counts the instructions of its operations so.
void bench_callgrind_toggle_collect(void);

/// Resident set size now, from /proc/self/statm, read without allocating.
uint64_t bench_rss_bytes(void);

/// A blocking eventfd used as a binary "it happened" signal between threads:
/// `signal` adds one, `wait` sleeps in the kernel until the counter is non-zero and
/// resets it. Returns -1 from `new` on failure.
int bench_event_new(void);
void bench_event_signal(int fd);
void bench_event_wait(int fd);
void bench_event_close(int fd);

// ---- Cross-process responder cell (platform.c) -----------------------------------

/// What the responder of a cross-process ping-pong (a child process) shares with the
/// initiator: where it last ran, for the same-CPU column, and how many pings it
/// answered, checked once it has exited. One page of memory both processes map; the
/// responder stores both after every ping it checked, as the in-process responders do.
typedef struct bench_responder_cell {
    int32_t cpu;            // sched_getcpu of the last answer, -1 before the first
    uint64_t answered;      // pings checked and answered
} bench_responder_cell;

/// Maps a new cell. With `inheritable_descriptor`, it is backed by a memfd left open
/// across exec (its number is stored there) for a spawned child to map with
/// `bench_responder_cell_map`; with NULL, by anonymous shared memory that a fork()ed
/// child shares. NULL on failure.
bench_responder_cell *bench_responder_cell_create(int *inheritable_descriptor);

/// Maps the cell behind a descriptor from `bench_responder_cell_create`. NULL on failure.
bench_responder_cell *bench_responder_cell_map(int descriptor);

void bench_responder_cell_unmap(bench_responder_cell *cell);

/// Responder: one more ping checked and answered, on the CPU it runs on now.
static inline void bench_responder_cell_answer(bench_responder_cell *cell, uint64_t answered) {
    __atomic_store_n(&cell->cpu, (int32_t)bench_current_cpu(), __ATOMIC_RELAXED);
    __atomic_store_n(&cell->answered, answered, __ATOMIC_RELAXED);
}

/// Initiator: the CPU of the responder's last answer.
static inline int32_t bench_responder_cell_cpu(const bench_responder_cell *cell) {
    return __atomic_load_n(&cell->cpu, __ATOMIC_RELAXED);
}

/// Initiator, once the responder has exited (waitpid orders its stores before this).
static inline uint64_t bench_responder_cell_answered(const bench_responder_cell *cell) {
    return __atomic_load_n(&cell->answered, __ATOMIC_RELAXED);
}

// ---- Foundation RunLoop on Linux (foundation_runloop.c) ------------------------

/// CFRunLoopGetCurrent / CFRunLoopWakeUp, which Foundation on Linux exports but does
/// not declare to Swift. RunLoop.perform only enqueues; without the wake-up a
/// sleeping Foundation run loop never runs the block.
void *bench_cf_runloop_current(void);
void bench_cf_runloop_wake_up(void *runloop);
void bench_cf_runloop_stop(void *runloop);

// ---- Credit window (window.c) ----------------------------------------------------

/// Bounds an otherwise unbounded queue (DispatchQueue, EventLoop.execute,
/// RunLoop.perform) to `limit` messages in flight, the way MessagePort's queueLimit
/// and the C ring bound theirs. The sender sleeps in the kernel when the window is
/// full and is woken only when it is half empty again, so a full window costs one
/// wake-up per limit/2 messages, not one per message.
typedef struct bench_window bench_window;

bench_window *bench_window_new(uint32_t limit);
void bench_window_free(bench_window *window);
/// Sender side: takes one credit, sleeping while none is left.
void bench_window_acquire(bench_window *window);
/// Receiver side: returns one credit, waking a sleeping sender at the low watermark.
void bench_window_release(bench_window *window);

// ---- Payloads -----------------------------------------------------------------------

/// The 64-byte throughput payload: word 0 is the sequence number, words 1-6 a pattern
/// derived from it, word 7 is 1 on the last message of the stream and 0 otherwise.
/// Every receiver checks all eight words.
enum { BENCH_PAYLOAD_WORDS = 8, BENCH_PAYLOAD_BYTES = 64 };

static inline void bench_payload_fill(uint64_t *words, uint64_t seq, int last) {
    words[0] = seq;
    for (int k = 1; k < 7; k++) words[k] = seq ^ ((uint64_t)k * 0x9E3779B97F4A7C15u);
    words[7] = last ? 1u : 0u;
}

/// Returns 1 when `words` is the payload of `expected_seq`, and sets *last.
static inline int bench_payload_check(const uint64_t *words, uint64_t expected_seq, int *last) {
    if (words[0] != expected_seq || words[7] > 1) return 0;
    for (int k = 1; k < 7; k++)
        if (words[k] != (expected_seq ^ ((uint64_t)k * 0x9E3779B97F4A7C15u))) return 0;
    *last = (int)words[7];
    return 1;
}

// ---- Latency runs (ping-pong and perform) ---------------------------------------

/// What a latency run measures: `warmup` round trips are discarded, then samples are
/// recorded until `capacity` are in or `budget_ns` has passed since the first one.
typedef struct bench_latency_plan {
    uint64_t *samples;      // capacity slots, filled with nanoseconds
    size_t capacity;
    size_t warmup;
    uint64_t budget_ns;
} bench_latency_plan;

typedef struct bench_latency_result {
    size_t count;           // samples recorded
    size_t same_cpu;        // samples during which both threads were on the same CPU
    uint64_t messages;      // one-way messages in the measured window, verified by both sides
    bench_alloc_counts allocs_begin, allocs_end;  // around the measured window
    const char *failure;    // NULL when every message verified
} bench_latency_result;

/// Ping-pong, two threads, each blocked in read(2) on its own eventfd; the 8-byte
/// payload is the eventfd counter value itself (sequence number + 1).
void bench_eventfd_pingpong(const bench_latency_plan *plan, bench_latency_result *result);

/// The `idle` workload's idle descriptor sources per loop (IdleItems.descriptorSources), which
/// the C eventfd + epoll reference holds in each thread's epoll set as well.
enum { BENCH_IDLE_DESCRIPTORS = 100 };

/// Reference, the floor under RunLoopKit's futex sleep: two threads, each asleep in
/// FUTEX_WAIT_PRIVATE on its own futex word until the other leaves the 8-byte sequence number
/// in its mailbox and FUTEX_WAKE_PRIVATEs it. See doorbell_pingpong.c.
void bench_futex_pingpong(const bench_latency_plan *plan, bench_latency_result *result);

/// Reference, the floor under RunLoopKit's epoll sleep: the same mailboxes, each thread asleep
/// in epoll_wait(2) on a set holding its doorbell eventfd (EPOLLET, never read) and
/// `BENCH_IDLE_DESCRIPTORS` idle eventfds; a sender writes the doorbell. See doorbell_pingpong.c.
void bench_eventfd_epoll_pingpong(const bench_latency_plan *plan, bench_latency_result *result);

/// Ping-pong, two threads, blocking send/recv of 8-byte packets on an
/// AF_UNIX SOCK_SEQPACKET socketpair.
void bench_socketpair_pingpong(const bench_latency_plan *plan, bench_latency_result *result);

/// Ping-pong between two processes: blocking send/recv of 8-byte packets on an
/// AF_UNIX SOCK_SEQPACKET socketpair whose other end a fork()ed child (no Swift
/// runtime: it only echoes, then _exits) holds.
void bench_socketpair_xprocess(const bench_latency_plan *plan, bench_latency_result *result);

/// The same two processes, each asleep in epoll_wait(2) on its socket and an eventfd, then
/// a non-blocking recv: the kernel's floor under any event loop's cross-process ping-pong.
void bench_socketpair_epoll_xprocess(const bench_latency_plan *plan, bench_latency_result *result);

/// The same, each side also reading every packet's sender credentials (SO_PASSCRED; recvmsg
/// with SCM_CREDENTIALS, the pid checked): the floor under a loop that reports a
/// kernel-verified sender with each message.
void bench_socketpair_epoll_credentials_xprocess(const bench_latency_plan *plan, bench_latency_result *result);

/// The same, each side also receiving a pidfd of every packet's sender (SO_PASSPIDFD: an
/// SCM_PIDFD per packet, installed by the kernel and closed by the receiver): the floor under a
/// loop that would pin each sender per message.
void bench_socketpair_epoll_pidfd_xprocess(const bench_latency_plan *plan, bench_latency_result *result);

/// An sd-bus peer-to-peer method call (libsystemd, no broker) between two processes over a
/// socketpair: the initiator calls `Echo(t) -> t` on the responder's object with
/// sd_bus_call_method, the responder answers from its sd_bus_process loop. What a C daemon
/// author would use instead of a port.
void bench_sdbus_p2p_xprocess(const bench_latency_plan *plan, bench_latency_result *result);

/// The same method call through a private `dbus-daemon --session` started for the run (the
/// responder owns a well-known name there): D-Bus as most daemons use it. Fails with a failure
/// string naming the reason when dbus-daemon cannot be started (`bench_dbus_daemon_available`).
void bench_sdbus_broker_xprocess(const bench_latency_plan *plan, bench_latency_result *result);

/// Whether `dbus-daemon` can be found on PATH (the broker row is skipped, with a note, if not).
int bench_dbus_daemon_available(void);

/// Ping-pong, two threads each running its own sd_event loop (libsystemd) with an io
/// source on its eventfd; handlers read the ping and write the pong.
void bench_sdevent_pingpong(const bench_latency_plan *plan, bench_latency_result *result);

/// One-way wake-up latency: the calling thread writes an eventfd that a second thread
/// is blocked reading; the sample is the time from before the write to the wake-up.
void bench_eventfd_wakeup(const bench_latency_plan *plan, bench_latency_result *result);

// ---- Large messages between processes (xlarge) -------------------------------------------

/// The first and last byte of the xlarge workload's message `seq`, the two bytes every receiver
/// reads and checks (the bytes between them are 0 in fresh memory, `BENCH_XLARGE_FILL` in a
/// copied buffer: the high bit makes each differ from both, so a stale or misplaced buffer fails).
static inline uint8_t bench_xlarge_first_byte(uint64_t seq) { return (uint8_t)(0x80 | (seq & 0x7f)); }
static inline uint8_t bench_xlarge_last_byte(uint64_t seq) { return (uint8_t)(0x80 | ((seq * 37 + 11) & 0x7f)); }
enum { BENCH_XLARGE_FILL = 0x5A };

/// The 8-byte acknowledgement of message `seq`: what the receiver checked (the sequence number's
/// low 24 bits, the byte count's low 32) and whether the bytes arrived in sealed memory, for the
/// initiator to compare with what it sent — a row whose bytes took another path than the one it
/// names fails.
static inline uint64_t bench_xlarge_ack(uint64_t seq, uint64_t bytes, int sealed) {
    return (seq & 0xffffffu) | (bytes & 0xffffffffu) << 24 | (uint64_t)(sealed != 0) << 63;
}

/// A C peer of the xlarge workload: a fork()ed responder and the connection to it, kept across
/// every measurement of a row — sizes one after another, and segments measured in alternation
/// with a RunLoopKit row — so that no measurement pays for a fork. See memfd_xlarge.c.
typedef struct bench_xlarge_peer bench_xlarge_peer;

/// The floor: per message a memfd is created, its first and last byte written through a shared
/// mapping, unmapped, sealed (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW) and sent with SCM_RIGHTS
/// over a SEQPACKET socketpair; the responder checks the size and seals, maps it read-only,
/// checks both bytes, unmaps, closes and acknowledges. NULL, with `*failure` set, on failure.
bench_xlarge_peer *bench_memfd_xlarge_open(const char **failure);

/// The bytes copied through the kernel: the initiator writes a 16-byte header and the N bytes on a
/// SOCK_STREAM socketpair, the responder reads all of them into a buffer it reuses.
bench_xlarge_peer *bench_stream_xlarge_open(const char **failure);

/// An sd-bus peer-to-peer method call `Take(t seq, t bytes, ay data) -> t` (libsystemd, no broker;
/// see sdbus_xprocess.c). D-Bus arrays hold at most `BENCH_SDBUS_ARRAY_MAX` bytes.
bench_xlarge_peer *bench_sdbus_xlarge_open(const char **failure);
enum { BENCH_SDBUS_ARRAY_MAX = 1 << 26 };

/// Round trips of messages of `bytes` bytes until the plan has its samples (each sample one
/// round trip: the message and its acknowledgement).
void bench_xlarge_measure(bench_xlarge_peer *peer, size_t bytes, const bench_latency_plan *plan,
                          bench_latency_result *result);

/// Hangs up, reaps the responder and frees the peer: NULL, or why the responder failed or
/// answered another number of messages than were sent.
const char *bench_xlarge_close(bench_xlarge_peer *peer);

/// One copy of `bytes` bytes from `source` into new memory (mmap, memcpy, munmap) per sample:
/// what the sending side of an ordinary Data adds to the floor, which copies it into a new memfd.
void bench_memcpy_xlarge(const void *source, size_t bytes, const bench_latency_plan *plan,
                         bench_latency_result *result);

// ---- Throughput runs -------------------------------------------------------------------

/// What a stream measures: `warmup` messages are sent before the clock starts; the
/// stream ends after `max_messages` or once `budget_ns` has passed since the warm-up.
typedef struct bench_stream_plan {
    uint64_t max_messages;
    uint64_t warmup;
    uint64_t budget_ns;
    uint32_t queue_limit;   // ring slots; must be a power of two
} bench_stream_plan;

typedef struct bench_stream_result {
    uint64_t messages;      // messages received after the warm-up, each verified
    uint64_t elapsed_ns;    // from the end of the warm-up to the last receive
    bench_alloc_counts allocs_begin, allocs_end;
    uint64_t rss_begin, rss_end;
    const char *failure;
} bench_stream_result;

/// Bounded single-producer single-consumer ring of 64-byte slots. The consumer is woken
/// through an eventfd only when it announced it may sleep; a producer that found the
/// ring full sleeps on a second eventfd until the consumer has drained what it saw.
void bench_ring_throughput(const bench_stream_plan *plan, bench_stream_result *result);

/// The fan-in workload's sender threads (every peer's).
enum { BENCH_FANIN_SENDERS = 4 };

/// `BENCH_FANIN_SENDERS` producer threads into one bounded ring of 64-byte slots (a mutex
/// claims slots, the consumer sleeps on an eventfd), each sender's `max_messages / 4`
/// (warm-up `warmup / 4`) checked in its own order. See ring_fanin.c.
void bench_ring_fanin(const bench_stream_plan *plan, bench_stream_result *result);

/// Blocking send of 64-byte packets over an AF_UNIX SOCK_SEQPACKET socketpair; the
/// socket buffer is the bound.
void bench_socketpair_throughput(const bench_stream_plan *plan, bench_stream_result *result);

#endif
