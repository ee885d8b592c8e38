/// Ping-pong over an AF_UNIX SOCK_SEQPACKET socketpair between two processes: the
/// kernel's own message transport across a process boundary, the baseline of the
/// `xprocess` workload. Each packet is one 8-byte sequence number, each side blocked
/// in recv(2). The responder is a fork()ed child that runs nothing but this loop (no
/// Swift runtime, no allocation) and leaves with _exit.

#define _GNU_SOURCE
#include <sys/socket.h>
#include <sys/wait.h>

#include "peer_support.h"

/// The responder's exit statuses, turned into the initiator's failure strings.
enum {
    RESPONDER_DONE = 0,            // end-of-stream after the initiator's last ping
    RESPONDER_MALFORMED = 1,       // a packet that was not exactly 8 bytes
    RESPONDER_OUT_OF_SEQUENCE = 2, // a ping other than the next sequence number
    RESPONDER_RECV_FAILED = 3,
};

/// MSG_NOSIGNAL: a peer that is gone is a failure to report, not a SIGPIPE.
static int send_u64(int fd, uint64_t value) {
    ssize_t n;
    while ((n = send(fd, &value, sizeof value, MSG_NOSIGNAL)) < 0 && errno == EINTR) {}
    return n == (ssize_t)sizeof value ? 0 : -1;
}

/// Receives one packet: 1 for exactly 8 bytes, 0 at end-of-stream, -1 for a packet of
/// another length (MSG_TRUNC reports the real length of a longer one), -2 if recv failed.
static int recv_u64(int fd, uint64_t *value) {
    ssize_t n;
    while ((n = recv(fd, value, sizeof *value, MSG_TRUNC)) < 0 && errno == EINTR) {}
    if (n < 0) return -2;
    if (n == 0) return 0;
    return n == (ssize_t)sizeof *value ? 1 : -1;
}

/// The child: echoes every ping until the initiator closes its end.
static _Noreturn void responder_main(int fd, bench_responder_cell *cell) {
    for (uint64_t expected = 1;; expected++) {
        uint64_t value;
        int rc = recv_u64(fd, &value);
        if (rc == 0) _exit(RESPONDER_DONE);
        if (rc < 0) {
            send_u64(fd, BENCH_POISON_VALUE);
            _exit(rc == -1 ? RESPONDER_MALFORMED : RESPONDER_RECV_FAILED);
        }
        if (value != expected) {
            send_u64(fd, BENCH_POISON_VALUE);
            _exit(RESPONDER_OUT_OF_SEQUENCE);
        }
        bench_responder_cell_answer(cell, expected);
        send_u64(fd, value);
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
    default: return "C socketpair: responder process exited with an unexpected status";
    }
}

void bench_socketpair_xprocess(const bench_latency_plan *plan, bench_latency_result *result) {
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
        responder_main(fds[1], cell);
    }
    close(fds[1]);

    uint64_t sent = 0;
    for (uint64_t seq = 1;; seq++) {
        uint64_t t0 = bench_now_ns();
        send_u64(fds[0], seq);
        sent = seq;
        uint64_t value;
        int rc = recv_u64(fds[0], &value);
        uint64_t t1 = bench_now_ns();
        if (rc != 1 || value != seq) {
            result->failure = "C socketpair: initiator received a wrong pong";
            break;
        }
        int same = bench_current_cpu() == bench_responder_cell_cpu(cell);
        if (!bench_recorder_add(&recorder, t1 - t0, same, t1)) break;
    }
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
