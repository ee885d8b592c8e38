/// Ping-pong over an AF_UNIX SOCK_SEQPACKET socketpair between two processes: the
/// kernel's own message transport across a process boundary, the baseline of the
/// `xprocess` workload. Each packet is one 8-byte sequence number, each side blocked
/// in recv(2). The responder is a fork()ed child that runs nothing but this loop (no
/// Swift runtime, no allocation) and leaves with _exit.
///
/// The same exchange with each side asleep in epoll_wait(2) instead (on its socket and an
/// eventfd, then a non-blocking recv) is the `C socketpair + epoll` reference: what the
/// kernel charges any event loop, which must sleep on more than one descriptor. With each
/// packet's sender credentials read as well (SO_PASSCRED, recvmsg, the pid checked), it is
/// the `C socketpair + epoll + credentials` reference: what the kernel charges a loop that
/// tells its callers which process sent each message, as RunLoopKit's `Message.sender` does.
/// With a pidfd of each packet's sender received too (SO_PASSPIDFD: an SCM_PIDFD installed by
/// the kernel per packet, closed by the receiver), it is `C socketpair + epoll + SCM_PIDFD`:
/// what pinning every sender per packet would cost (RunLoopKit pins a connection's sender
/// once and checks with one poll(2) per packet that it still holds its pid, see
/// PortConnection.swift).

#define _GNU_SOURCE
#include <sys/socket.h>
#include <sys/wait.h>

#include "peer_support.h"

/// The responder's exit statuses, turned into the initiator's failure strings.
enum {
    RESPONDER_DONE = 0,            // end-of-stream after the initiator's last ping
    RESPONDER_MALFORMED = 1,       // a packet that was not exactly 8 bytes, or not from its parent
    RESPONDER_OUT_OF_SEQUENCE = 2, // a ping other than the next sequence number
    RESPONDER_RECV_FAILED = 3,
    RESPONDER_EPOLL_FAILED = 4,    // its epoll set could not be built, or SO_PASSCRED set
};

static int32_t responder_cpu(const void *context) {
    return bench_responder_cell_cpu(context);
}

/// The child: echoes every ping until the initiator closes its end.
/// What each end reads with every packet: nothing but the bytes, the sender's credentials, or
/// its credentials and a pidfd.
enum { SENDER_NONE = 0, SENDER_CREDENTIALS = 1, SENDER_PIDFD = 2 };

static int expect_sender(bench_seqpacket_end *end, int sender, pid_t peer) {
    switch (sender) {
    case SENDER_CREDENTIALS: return bench_seqpacket_expect_credentials(end, peer);
    case SENDER_PIDFD: return bench_seqpacket_expect_pidfds(end, peer);
    default: return 1;
    }
}

static _Noreturn void responder_main(int fd, int through_epoll, int sender, bench_responder_cell *cell) {
    bench_seqpacket_end end;
    if (!bench_seqpacket_open_end(fd, through_epoll, &end) || !expect_sender(&end, sender, getppid())) {
        bench_seqpacket_send_u64(fd, BENCH_POISON_VALUE);
        _exit(RESPONDER_EPOLL_FAILED);
    }
    for (uint64_t expected = 1;; expected++) {
        uint64_t value;
        int rc = bench_seqpacket_recv_u64(end, &value);
        if (rc == 0) _exit(RESPONDER_DONE);
        if (rc < 0) {
            bench_seqpacket_send_u64(fd, BENCH_POISON_VALUE);
            _exit(rc == -1 ? RESPONDER_MALFORMED : RESPONDER_RECV_FAILED);
        }
        if (value != expected) {
            bench_seqpacket_send_u64(fd, BENCH_POISON_VALUE);
            _exit(RESPONDER_OUT_OF_SEQUENCE);
        }
        bench_responder_cell_answer(cell, expected);
        bench_seqpacket_send_u64(fd, value);
    }
}

/// The responder's failure, from its wait status; NULL when it finished cleanly.
static const char *responder_failure(int status) {
    if (WIFSIGNALED(status)) return "C socketpair: responder process was killed by a signal";
    switch (WEXITSTATUS(status)) {
    case RESPONDER_DONE: return NULL;
    case RESPONDER_MALFORMED: return "C socketpair: responder received a malformed packet";
    case RESPONDER_OUT_OF_SEQUENCE: return "C socketpair: responder received an out-of-sequence ping";
    case RESPONDER_RECV_FAILED: return "C socketpair: responder's recv failed";
    case RESPONDER_EPOLL_FAILED: return "C socketpair: responder could not build its epoll set or set SO_PASSCRED (SO_PASSPIDFD)";
    default: return "C socketpair: responder process exited with an unexpected status";
    }
}

static void xprocess(const bench_latency_plan *plan, bench_latency_result *result, int through_epoll, int sender) {
    bench_latency_recorder recorder;
    bench_recorder_init(&recorder, plan, result, 2);
    bench_responder_cell *cell = bench_responder_cell_create(NULL);
    if (cell == NULL) {
        result->failure = "C socketpair: mmap of the shared responder cell failed";
        return;
    }
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
        bench_responder_cell_unmap(cell);
        result->failure = "C socketpair: socketpair failed";
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        bench_responder_cell_unmap(cell);
        result->failure = "C socketpair: fork failed";
        return;
    }
    if (pid == 0) {
        close(fds[0]);
        responder_main(fds[1], through_epoll, sender, cell);
    }
    close(fds[1]);

    bench_seqpacket_end end;
    uint64_t sent = 0;
    if (!bench_seqpacket_open_end(fds[0], through_epoll, &end)) result->failure = "C socketpair: epoll set could not be built";
    else if (!expect_sender(&end, sender, pid)) result->failure = "C socketpair: SO_PASSCRED (SO_PASSPIDFD) failed";
    else sent = bench_seqpacket_initiate(end, &recorder, responder_cpu, cell, &result->failure);
    bench_seqpacket_end_close(end);
    close(fds[0]);  // end-of-stream: the responder exits
    int status = 0;
    pid_t reaped;
    while ((reaped = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {}
    uint64_t answered = bench_responder_cell_answered(cell);
    bench_responder_cell_unmap(cell);
    const char *failure = reaped == pid ? responder_failure(status) : "C socketpair: waitpid failed";
    if (failure != NULL) result->failure = failure;
    else if (result->failure == NULL && answered != sent)
        result->failure = "C socketpair: responder count does not match the pings sent";
}

void bench_socketpair_xprocess(const bench_latency_plan *plan, bench_latency_result *result) {
    xprocess(plan, result, 0, SENDER_NONE);
}

void bench_socketpair_epoll_xprocess(const bench_latency_plan *plan, bench_latency_result *result) {
    xprocess(plan, result, 1, SENDER_NONE);
}

void bench_socketpair_epoll_credentials_xprocess(const bench_latency_plan *plan, bench_latency_result *result) {
    xprocess(plan, result, 1, SENDER_CREDENTIALS);
}

void bench_socketpair_epoll_pidfd_xprocess(const bench_latency_plan *plan, bench_latency_result *result) {
    xprocess(plan, result, 1, SENDER_PIDFD);
}
