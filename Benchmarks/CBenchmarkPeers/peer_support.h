#ifndef BENCH_PEER_SUPPORT_H
#define BENCH_PEER_SUPPORT_H

/// What the C peers share: blocking, EINTR-safe 8-byte reads and writes, and the
/// latency recorder that turns round trips into samples the same way for every peer.

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "CBenchmarkPeers.h"

/// A sequence number no ping ever carries: tells the responder to exit.
#define BENCH_STOP_VALUE (UINT64_C(1) << 62)
/// Sent back by a responder that rejected a message, so the initiator fails too
/// instead of waiting for a reply that will never come.
#define BENCH_POISON_VALUE (UINT64_C(1) << 61)

static inline int bench_read_u64(int fd, uint64_t *value) {
    ssize_t n;
    while ((n = read(fd, value, sizeof *value)) < 0 && errno == EINTR) {}
    return n == (ssize_t)sizeof *value ? 0 : -1;
}

static inline int bench_write_u64(int fd, uint64_t value) {
    ssize_t n;
    while ((n = write(fd, &value, sizeof value)) < 0 && errno == EINTR) {}
    return n == (ssize_t)sizeof value ? 0 : -1;
}

/// SOCK_SEQPACKET ping-pong helpers shared by the thread and the process variants.
/// MSG_NOSIGNAL: a peer that is gone is a failure to report, not a SIGPIPE.
static inline int bench_seqpacket_send_u64(int fd, uint64_t value) {
    ssize_t n;
    while ((n = send(fd, &value, sizeof value, MSG_NOSIGNAL)) < 0 && errno == EINTR) {}
    return n == (ssize_t)sizeof value ? 0 : -1;
}

/// How one end waits for its next packet. `epfd` < 0: blocked in recv(2) itself, the
/// kernel's shortest path. Otherwise the floor under any event loop: asleep in
/// epoll_wait(2) on a set holding the socket and an eventfd (the wake-up a loop keeps for
/// everything else it serves), then recv(2) without blocking.
typedef struct bench_seqpacket_end {
    int fd;
    int epfd;
    int wakefd;
    /// 0, or the process every packet must come from as its SCM_CREDENTIALS say
    /// (`bench_seqpacket_expect_credentials`): what a loop that tells its callers who sent
    /// each message pays the kernel for it.
    pid_t peer_pid;
    /// Every packet also brings a pidfd of its sender (SO_PASSPIDFD: an SCM_PIDFD per packet,
    /// installed by the kernel and closed here), what pinning each sender per packet costs.
    int pidfds;
} bench_seqpacket_end;

static inline bench_seqpacket_end bench_seqpacket_blocking_end(int fd) {
    return (bench_seqpacket_end){ .fd = fd, .epfd = -1, .wakefd = -1, .peer_pid = 0, .pidfds = 0 };
}

/// Makes `*end` for `fd`: blocking, or (`through_epoll`) waiting through epoll. Returns 0,
/// with a blocking end, when the epoll set could not be built.
static inline int bench_seqpacket_open_end(int fd, int through_epoll, bench_seqpacket_end *end) {
    *end = bench_seqpacket_blocking_end(fd);
    if (!through_epoll) return 1;
    end->epfd = epoll_create1(EPOLL_CLOEXEC);
    end->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event socket_event = { .events = EPOLLIN, .data.u64 = 1 };
    struct epoll_event wake_event = { .events = EPOLLIN | EPOLLET, .data.u64 = 2 };
    if (end->epfd >= 0 && end->wakefd >= 0 && epoll_ctl(end->epfd, EPOLL_CTL_ADD, fd, &socket_event) == 0 &&
        epoll_ctl(end->epfd, EPOLL_CTL_ADD, end->wakefd, &wake_event) == 0) return 1;
    if (end->epfd >= 0) close(end->epfd);
    if (end->wakefd >= 0) close(end->wakefd);
    *end = bench_seqpacket_blocking_end(fd);
    return 0;
}

/// Closes the end's epoll set and eventfd (not its socket).
static inline void bench_seqpacket_end_close(bench_seqpacket_end end) {
    if (end.epfd >= 0) close(end.epfd);
    if (end.wakefd >= 0) close(end.wakefd);
}

#ifdef SCM_CREDENTIALS
/// Makes every packet `end` receives carry its sender's credentials (SO_PASSCRED), and
/// `bench_seqpacket_recv_u64` check that they name `peer`. Returns 0 when the option could
/// not be set. Needs _GNU_SOURCE (struct ucred), as the kernel's own headers do.
static inline int bench_seqpacket_expect_credentials(bench_seqpacket_end *end, pid_t peer) {
    int on = 1;
    if (setsockopt(end->fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0) return 0;
    end->peer_pid = peer;
    return 1;
}

#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD 76
#endif
#ifndef SCM_PIDFD
#define SCM_PIDFD 0x04
#endif

/// As `bench_seqpacket_expect_credentials`, and every packet must also bring a pidfd of its
/// sender (SO_PASSPIDFD, Linux 6.5+), which is closed once received. Returns 0 when an option
/// could not be set.
static inline int bench_seqpacket_expect_pidfds(bench_seqpacket_end *end, pid_t peer) {
    int on = 1;
    if (!bench_seqpacket_expect_credentials(end, peer) ||
        setsockopt(end->fd, SOL_SOCKET, SO_PASSPIDFD, &on, sizeof on) != 0) return 0;
    end->pidfds = 1;
    return 1;
}

/// `bench_seqpacket_recv_u64`'s receive for an end that expects credentials: recvmsg's
/// result, and in `*credited` whether the packet's SCM_CREDENTIALS name the expected process
/// (and, for an end that expects pidfds, whether one came, which is then closed).
static inline ssize_t bench_seqpacket_recv_credited(bench_seqpacket_end end, uint64_t *value, int flags, int *credited) {
    union {
        char bytes[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    struct iovec iov = { .iov_base = value, .iov_len = sizeof *value };
    struct msghdr message = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.bytes,
                              .msg_controllen = sizeof control.bytes };
    ssize_t n;
    while ((n = recvmsg(end.fd, &message, flags | MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {}
    int pid_matches = 0, pinned = !end.pidfds;
    for (struct cmsghdr *header = n > 0 ? CMSG_FIRSTHDR(&message) : NULL; header != NULL;
         header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET) continue;
        if (header->cmsg_type == SCM_CREDENTIALS) {
            struct ucred credentials;
            memcpy(&credentials, CMSG_DATA(header), sizeof credentials);
            pid_matches = credentials.pid == end.peer_pid;
        } else if (header->cmsg_type == SCM_PIDFD) {
            int pidfd;
            memcpy(&pidfd, CMSG_DATA(header), sizeof pidfd);
            if (pidfd >= 0) {
                close(pidfd);
                pinned = 1;
            }
        }
    }
    *credited = pid_matches && pinned;
    return n;
}
#endif

/// Receives one packet: 1 for exactly 8 bytes, 0 at end-of-stream, -1 for a packet of
/// another length (MSG_TRUNC reports the real length of a longer one) or without the
/// expected credentials, -2 if recv failed.
static inline int bench_seqpacket_recv_u64(bench_seqpacket_end end, uint64_t *value) {
    ssize_t n;
    if (end.epfd >= 0) {
        struct epoll_event events[4];
        int ready;
        while ((ready = epoll_wait(end.epfd, events, 4, -1)) < 0 && errno == EINTR) {}
        if (ready < 0) return -2;
    }
    int flags = MSG_TRUNC | (end.epfd >= 0 ? MSG_DONTWAIT : 0);
    int credited = 1;
#ifdef SCM_CREDENTIALS
    if (end.peer_pid > 0) n = bench_seqpacket_recv_credited(end, value, flags, &credited);
    else
#endif
    while ((n = recv(end.fd, value, sizeof *value, flags)) < 0 && errno == EINTR) {}
    if (n < 0) return -2;
    if (n == 0) return 0;
    return n == (ssize_t)sizeof *value && credited ? 1 : -1;
}

/// The stream producers' clock, one step per message `seq`: at the end of the warm-up it
/// snapshots allocations and RSS and starts the clock in `*started`; it returns whether `seq`
/// is the last message (the plan's count, or its budget spent, checked every 4096 messages).
static inline int bench_stream_step(const bench_stream_plan *plan, bench_stream_result *result,
                                    uint64_t seq, uint64_t *started) {
    if (seq == plan->warmup) {
        result->allocs_begin = bench_alloc_snapshot();
        result->rss_begin = bench_rss_bytes();
        *started = bench_now_ns();
    }
    return seq + 1 == plan->max_messages ||
           (seq > plan->warmup && (seq & 4095) == 0 && bench_now_ns() - *started >= plan->budget_ns);
}

typedef struct bench_latency_recorder {
    const bench_latency_plan *plan;
    bench_latency_result *result;
    uint64_t messages_per_sample;  // 2 for a round trip, 1 for a one-way wake-up
    uint64_t rounds;               // samples offered so far, warm-up included
    uint64_t started_ns;
} bench_latency_recorder;

static inline void bench_recorder_start_window(bench_latency_recorder *r) {
    r->result->allocs_begin = bench_alloc_snapshot();
    r->started_ns = bench_now_ns();
}

static inline void bench_recorder_init(bench_latency_recorder *r, const bench_latency_plan *plan,
                                       bench_latency_result *result, uint64_t messages_per_sample) {
    *r = (bench_latency_recorder){ .plan = plan, .result = result,
                                   .messages_per_sample = messages_per_sample };
    *result = (bench_latency_result){ 0 };
    if (plan->warmup == 0) bench_recorder_start_window(r);
}

/// Offers one sample taken at `now_ns`; returns 0 once the run is complete.
static inline int bench_recorder_add(bench_latency_recorder *r, uint64_t sample_ns, int same_cpu,
                                     uint64_t now_ns) {
    if (r->rounds++ < r->plan->warmup) {
        if (r->rounds == r->plan->warmup) bench_recorder_start_window(r);
        return 1;
    }
    bench_latency_result *result = r->result;
    r->plan->samples[result->count++] = sample_ns;
    result->same_cpu += same_cpu ? 1 : 0;
    result->messages += r->messages_per_sample;
    if (result->count < r->plan->capacity && now_ns - r->started_ns < r->plan->budget_ns) return 1;
    result->allocs_end = bench_alloc_snapshot();
    return 0;
}

/// The initiator of a SOCK_SEQPACKET ping-pong: sends 1, 2, 3… on `fd`, times each echo and
/// records it until the recorder has enough samples. `responder_cpu(context)` is the CPU the
/// responder last ran on. Returns the number of pings sent; a wrong pong sets `*failure`.
static inline uint64_t bench_seqpacket_initiate(bench_seqpacket_end end, bench_latency_recorder *recorder,
                                                int32_t (*responder_cpu)(const void *context),
                                                const void *context, const char **failure) {
    uint64_t sent = 0;
    for (uint64_t seq = 1;; seq++) {
        uint64_t t0 = bench_now_ns();
        bench_seqpacket_send_u64(end.fd, seq);
        sent = seq;
        uint64_t value;
        int rc = bench_seqpacket_recv_u64(end, &value);
        uint64_t t1 = bench_now_ns();
        if (rc != 1 || value != seq) {
            *failure = "C socketpair: initiator received a wrong pong";
            break;
        }
        int same = bench_current_cpu() == responder_cpu(context);
        if (!bench_recorder_add(recorder, t1 - t0, same, t1)) break;
    }
    return sent;
}

/// An xlarge peer (memfd_xlarge.c, sdbus_xprocess.c): its responder, the connection to it, and
/// how one round trip is made over it.
struct bench_xlarge_peer {
    const char *name;               // for failure strings
    int fd;                         // the initiator's socket (owned by `bus` once that is set)
    void *bus;                      // sd-bus only: the initiator's sd_bus
    pid_t pid;                      // the responder
    bench_responder_cell *cell;
    uint64_t sent;                  // messages sent over every measurement
    /// Peers that send a buffer's bytes (stream, sd-bus): a mapping of `source_bytes`, filled with
    /// BENCH_XLARGE_FILL before the measurement of that size (the first and last byte are set per
    /// message); NULL for the memfd floor, which writes into the memory it sends.
    uint8_t *source;
    size_t source_bytes;
    int sends_source;
    /// Sends message `seq` of `bytes` bytes and checks its acknowledgement; 0, with `*failure`
    /// set, when anything went wrong.
    int (*round)(struct bench_xlarge_peer *peer, uint64_t seq, size_t bytes, const char **failure);
    /// Ends the connection (the responder then exits 0).
    void (*hang_up)(struct bench_xlarge_peer *peer);
    /// The responder's failure from its wait status, NULL when it finished cleanly.
    const char *(*responder_failure)(int status);
};

/// A new peer: a socketpair of `type`, a fork()ed child that runs `responder` on its end (and
/// never returns), the shared responder cell. NULL, with `*failure` set, on failure.
bench_xlarge_peer *bench_xlarge_peer_fork(const char *name, int type,
                                          void (*responder)(int fd, bench_responder_cell *cell),
                                          const char **failure);

/// Reads or writes exactly `length` bytes of a stream (EINTR-safe): 1, 0 at end-of-stream, -1 on error.
static inline int bench_read_exactly(int fd, void *buffer, size_t length) {
    uint8_t *bytes = buffer;
    while (length > 0) {
        ssize_t n = read(fd, bytes, length);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n == 0 ? 0 : -1;
        bytes += n;
        length -= (size_t)n;
    }
    return 1;
}

static inline int bench_write_exactly(int fd, const void *buffer, size_t length) {
    const uint8_t *bytes = buffer;
    while (length > 0) {
        ssize_t n = send(fd, bytes, length, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        bytes += n;
        length -= (size_t)n;
    }
    return 1;
}

#endif
