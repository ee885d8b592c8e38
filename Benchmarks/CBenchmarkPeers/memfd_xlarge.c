/// The C peers of the `xlarge` workload: a Data of N bytes (64 KiB to 256 MiB) to another
/// process and an 8-byte acknowledgement back, the receiver checking the first and last byte.
///
/// **C memfd + SCM_RIGHTS** is the floor under RunLoopKit's sealed memory: the least a process
/// can do to hand N bytes to another without copying them, with the receiver as careful as
/// Protocols/port-message-frame.md §3.5 asks (the seals checked before it maps, so that the memory
/// cannot change under it or be cut off). The producer writes through a shared mapping, as any
/// producer that builds its bytes in place must (write(2) would copy them from a buffer of its
/// own), and writes only the two bytes the receiver reads: what the floor costs then does not
/// grow with N, and neither may RunLoopKit's SealedMemory row, whose producer writes the same two.
///
/// **C SOCK_STREAM copy** is what the bytes cost when they travel through the kernel instead:
/// the initiator writes a header and the N bytes from a buffer filled once per size, the
/// responder reads all of them into a buffer it reuses (twice N bytes copied per message).
///
/// Each responder is a fork()ed child running only C, alive across every measurement of its
/// row (see `bench_xlarge_peer`); it counts what it answered in a `bench_responder_cell`, which
/// the initiator checks against what it sent once the child has exited.

#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "peer_support.h"

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

/// The seals a receiver requires (Protocols/port-message-frame.md, M2).
static const int immutable_seals = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW;

/// The responders' exit statuses, turned into the initiator's failure strings.
enum {
    RESPONDER_DONE = 0,          // end-of-stream after the initiator's last message
    RESPONDER_MALFORMED = 1,     // a message without its header, its descriptor, or out of sequence
    RESPONDER_NOT_SEALED = 2,    // memfd: not a memfd, not sealed, or smaller than the header said
    RESPONDER_MAP_FAILED = 3,    // memfd: mmap failed; stream: its buffer could not be grown
    RESPONDER_WRONG_BYTES = 4,   // the first or last byte was not the message's
    RESPONDER_IO_FAILED = 5,     // recv, read or the acknowledgement's send failed
};

static const char *responder_failure(int status) {
    if (WIFSIGNALED(status)) return "xlarge C peer: responder process was killed by a signal";
    switch (WEXITSTATUS(status)) {
    case RESPONDER_DONE: return NULL;
    case RESPONDER_MALFORMED: return "xlarge C peer: responder received a malformed or out-of-sequence message";
    case RESPONDER_NOT_SEALED: return "xlarge C memfd: responder received a descriptor that is not a sealed memfd of the size sent";
    case RESPONDER_MAP_FAILED: return "xlarge C peer: responder could not map the memory or grow its buffer";
    case RESPONDER_WRONG_BYTES: return "xlarge C peer: responder read a wrong first or last byte";
    case RESPONDER_IO_FAILED: return "xlarge C peer: responder's receive or acknowledgement failed";
    default: return "xlarge C peer: responder process exited with an unexpected status";
    }
}

bench_xlarge_peer *bench_xlarge_peer_fork(const char *name, int type,
                                          void (*responder)(int fd, bench_responder_cell *cell),
                                          const char **failure) {
    bench_xlarge_peer *peer = calloc(1, sizeof *peer);
    if (peer == NULL) {
        *failure = "xlarge C peer: out of memory";
        return NULL;
    }
    peer->name = name;
    peer->fd = -1;
    peer->responder_failure = responder_failure;
    peer->cell = bench_responder_cell_create(NULL);
    int fds[2];
    if (peer->cell == NULL || socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, fds) != 0) {
        if (peer->cell != NULL) bench_responder_cell_unmap(peer->cell);
        free(peer);
        *failure = "xlarge C peer: the shared cell or the socketpair could not be made";
        return NULL;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        bench_responder_cell_unmap(peer->cell);
        free(peer);
        *failure = "xlarge C peer: fork failed";
        return NULL;
    }
    if (pid == 0) {
        close(fds[0]);
        responder(fds[1], peer->cell);
        _exit(RESPONDER_DONE);
    }
    close(fds[1]);
    peer->fd = fds[0];
    peer->pid = pid;
    return peer;
}

/// Makes the source buffer `bytes` long and filled, outside the timed rounds; 0 on failure.
static int prepare_source(bench_xlarge_peer *peer, size_t bytes, const char **failure) {
    if (!peer->sends_source || peer->source_bytes == bytes) return 1;
    if (peer->source != NULL) munmap(peer->source, peer->source_bytes);
    peer->source = NULL;
    peer->source_bytes = 0;
    void *source = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (source == MAP_FAILED) {
        *failure = "xlarge C peer: the source buffer could not be mapped";
        return 0;
    }
    memset(source, BENCH_XLARGE_FILL, bytes);
    peer->source = source;
    peer->source_bytes = bytes;
    return 1;
}

void bench_xlarge_measure(bench_xlarge_peer *peer, size_t bytes, const bench_latency_plan *plan,
                          bench_latency_result *result) {
    bench_latency_recorder recorder;
    bench_recorder_init(&recorder, plan, result, 2);
    if (bytes == 0) {
        result->failure = "xlarge C peer: a message needs at least one byte";
        return;
    }
    if (!prepare_source(peer, bytes, &result->failure)) return;
    for (;;) {
        uint64_t seq = ++peer->sent;
        uint64_t t0 = bench_now_ns();
        if (!peer->round(peer, seq, bytes, &result->failure)) return;
        uint64_t t1 = bench_now_ns();
        int same = bench_current_cpu() == bench_responder_cell_cpu(peer->cell);
        if (!bench_recorder_add(&recorder, t1 - t0, same, t1)) return;
    }
}

const char *bench_xlarge_close(bench_xlarge_peer *peer) {
    if (peer->hang_up != NULL) peer->hang_up(peer);
    int status = 0;
    pid_t reaped;
    while ((reaped = waitpid(peer->pid, &status, 0)) < 0 && errno == EINTR) {}
    const char *failure = reaped == peer->pid ? peer->responder_failure(status) : "xlarge C peer: waitpid failed";
    if (failure == NULL && bench_responder_cell_answered(peer->cell) != peer->sent)
        failure = "xlarge C peer: the responder's count does not match the messages sent";
    bench_responder_cell_unmap(peer->cell);
    if (peer->source != NULL) munmap(peer->source, peer->source_bytes);
    free(peer);
    return failure;
}

static void close_socket(bench_xlarge_peer *peer) {
    close(peer->fd);  // end-of-stream: the responder exits
}

/// Receives the 8-byte acknowledgement of `seq` and compares it with what was sent.
static int expect_ack(int fd, int stream, uint64_t seq, size_t bytes, int sealed, const char **failure) {
    uint64_t ack = 0;
    int received = stream ? bench_read_exactly(fd, &ack, sizeof ack) == 1
                          : bench_seqpacket_recv_u64(bench_seqpacket_blocking_end(fd), &ack) == 1;
    if (!received) {
        *failure = "xlarge C peer: the responder hung up or sent a malformed acknowledgement";
        return 0;
    }
    if (ack != bench_xlarge_ack(seq, bytes, sealed)) {
        *failure = "xlarge C peer: wrong acknowledgement";
        return 0;
    }
    return 1;
}

// ---- C memfd + SCM_RIGHTS ---------------------------------------------------------------------

/// memfd_create with MFD_NOEXEC_SEAL where the kernel knows it (6.3+; without either flag a new
/// kernel warns), as RunLoopKit makes its memory.
static int create_memfd(void) {
    static int noexec = MFD_NOEXEC_SEAL;
    int fd = memfd_create("bench-xlarge", MFD_CLOEXEC | MFD_ALLOW_SEALING | noexec);
    if (fd < 0 && errno == EINVAL && noexec != 0) {
        noexec = 0;
        fd = memfd_create("bench-xlarge", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    }
    return fd;
}

static int memfd_round(bench_xlarge_peer *peer, uint64_t seq, size_t bytes, const char **failure) {
    int memfd = create_memfd();
    if (memfd < 0) {
        *failure = "xlarge C memfd: memfd_create failed";
        return 0;
    }
    if (ftruncate(memfd, (off_t)bytes) != 0) {
        close(memfd);
        *failure = "xlarge C memfd: ftruncate failed";
        return 0;
    }
    uint8_t *memory = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (memory == MAP_FAILED) {
        close(memfd);
        *failure = "xlarge C memfd: mmap failed";
        return 0;
    }
    memory[0] = bench_xlarge_first_byte(seq);
    memory[bytes - 1] = bench_xlarge_last_byte(seq);
    munmap(memory, bytes);  // F_SEAL_WRITE refuses while a writable shared mapping exists
    if (fcntl(memfd, F_ADD_SEALS, immutable_seals) != 0) {
        close(memfd);
        *failure = "xlarge C memfd: F_ADD_SEALS failed";
        return 0;
    }
    uint64_t header[2] = { seq, bytes };
    struct iovec iov = { .iov_base = header, .iov_len = sizeof header };
    union {
        char bytes[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr message = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.bytes,
                              .msg_controllen = sizeof control.bytes };
    struct cmsghdr *rights = CMSG_FIRSTHDR(&message);
    rights->cmsg_level = SOL_SOCKET;
    rights->cmsg_type = SCM_RIGHTS;
    rights->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(rights), &memfd, sizeof memfd);
    ssize_t n;
    while ((n = sendmsg(peer->fd, &message, MSG_NOSIGNAL)) < 0 && errno == EINTR) {}
    close(memfd);  // the message in flight holds the memory, then the responder
    if (n != (ssize_t)sizeof header) {
        *failure = "xlarge C memfd: sendmsg failed";
        return 0;
    }
    return expect_ack(peer->fd, 0, seq, bytes, 1, failure);
}

static void memfd_responder(int fd, bench_responder_cell *cell) {
    for (uint64_t expected = 1;; expected++) {
        uint64_t header[2];
        struct iovec iov = { .iov_base = header, .iov_len = sizeof header };
        union {
            char bytes[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } control;
        struct msghdr message = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.bytes,
                                  .msg_controllen = sizeof control.bytes };
        ssize_t n;
        while ((n = recvmsg(fd, &message, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {}
        if (n == 0) _exit(RESPONDER_DONE);
        if (n < 0) _exit(RESPONDER_IO_FAILED);
        int memfd = -1;
        struct cmsghdr *rights = CMSG_FIRSTHDR(&message);
        if (rights != NULL && rights->cmsg_level == SOL_SOCKET && rights->cmsg_type == SCM_RIGHTS &&
            rights->cmsg_len == CMSG_LEN(sizeof(int)))
            memcpy(&memfd, CMSG_DATA(rights), sizeof memfd);
        if (n != (ssize_t)sizeof header || memfd < 0 || (message.msg_flags & MSG_CTRUNC) || header[0] != expected ||
            header[1] == 0)
            _exit(RESPONDER_MALFORMED);
        size_t bytes = header[1];
        struct stat status;
        int seals = fcntl(memfd, F_GET_SEALS);
        if (fstat(memfd, &status) != 0 || !S_ISREG(status.st_mode) || (size_t)status.st_size < bytes || seals < 0 ||
            (seals & immutable_seals) != immutable_seals)
            _exit(RESPONDER_NOT_SEALED);
        const uint8_t *memory = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, memfd, 0);
        if (memory == MAP_FAILED) _exit(RESPONDER_MAP_FAILED);
        int right = memory[0] == bench_xlarge_first_byte(expected) && memory[bytes - 1] == bench_xlarge_last_byte(expected);
        munmap((void *)memory, bytes);
        close(memfd);
        if (!right) _exit(RESPONDER_WRONG_BYTES);
        bench_responder_cell_answer(cell, expected);
        if (bench_seqpacket_send_u64(fd, bench_xlarge_ack(expected, bytes, 1)) != 0) _exit(RESPONDER_IO_FAILED);
    }
}

bench_xlarge_peer *bench_memfd_xlarge_open(const char **failure) {
    bench_xlarge_peer *peer = bench_xlarge_peer_fork("C memfd", SOCK_SEQPACKET, memfd_responder, failure);
    if (peer == NULL) return NULL;
    peer->round = memfd_round;
    peer->hang_up = close_socket;
    return peer;
}

// ---- C SOCK_STREAM copy -------------------------------------------------------------------------

static int stream_round(bench_xlarge_peer *peer, uint64_t seq, size_t bytes, const char **failure) {
    peer->source[0] = bench_xlarge_first_byte(seq);
    peer->source[bytes - 1] = bench_xlarge_last_byte(seq);
    uint64_t header[2] = { seq, bytes };
    if (bench_write_exactly(peer->fd, header, sizeof header) != 1 || bench_write_exactly(peer->fd, peer->source, bytes) != 1) {
        *failure = "xlarge C SOCK_STREAM: write failed";
        return 0;
    }
    return expect_ack(peer->fd, 1, seq, bytes, 0, failure);
}

static void stream_responder(int fd, bench_responder_cell *cell) {
    uint8_t *buffer = NULL;
    size_t capacity = 0;
    for (uint64_t expected = 1;; expected++) {
        uint64_t header[2];
        int rc = bench_read_exactly(fd, header, sizeof header);
        if (rc == 0) _exit(RESPONDER_DONE);
        if (rc < 0) _exit(RESPONDER_IO_FAILED);
        if (header[0] != expected || header[1] == 0) _exit(RESPONDER_MALFORMED);
        size_t bytes = header[1];
        if (bytes > capacity) {  // a new, larger size: its first (warm-up) message grows the buffer
            if (buffer != NULL) munmap(buffer, capacity);
            buffer = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (buffer == MAP_FAILED) _exit(RESPONDER_MAP_FAILED);
            capacity = bytes;
        }
        if (bench_read_exactly(fd, buffer, bytes) != 1) _exit(RESPONDER_IO_FAILED);
        if (buffer[0] != bench_xlarge_first_byte(expected) || buffer[bytes - 1] != bench_xlarge_last_byte(expected))
            _exit(RESPONDER_WRONG_BYTES);
        bench_responder_cell_answer(cell, expected);
        uint64_t ack = bench_xlarge_ack(expected, bytes, 0);
        if (bench_write_exactly(fd, &ack, sizeof ack) != 1) _exit(RESPONDER_IO_FAILED);
    }
}

bench_xlarge_peer *bench_stream_xlarge_open(const char **failure) {
    bench_xlarge_peer *peer = bench_xlarge_peer_fork("C SOCK_STREAM", SOCK_STREAM, stream_responder, failure);
    if (peer == NULL) return NULL;
    peer->sends_source = 1;
    peer->round = stream_round;
    peer->hang_up = close_socket;
    return peer;
}

// ---- memcpy of N ----------------------------------------------------------------------------------

void bench_memcpy_xlarge(const void *source, size_t bytes, const bench_latency_plan *plan,
                         bench_latency_result *result) {
    bench_latency_recorder recorder;
    bench_recorder_init(&recorder, plan, result, 1);
    const uint8_t *from = source;
    if (bytes == 0) {
        result->failure = "memcpy of N: nothing to copy";
        return;
    }
    for (;;) {
        uint64_t t0 = bench_now_ns();
        uint8_t *to = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (to == MAP_FAILED) {
            result->failure = "memcpy of N: mmap failed";
            return;
        }
        memcpy(to, from, bytes);
        int right = to[0] == from[0] && to[bytes - 1] == from[bytes - 1];
        munmap(to, bytes);
        uint64_t t1 = bench_now_ns();
        if (!right) {
            result->failure = "memcpy of N: the copy differs from its source";
            return;
        }
        if (!bench_recorder_add(&recorder, t1 - t0, 1, t1)) return;
    }
}
