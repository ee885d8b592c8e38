/// D-Bus method calls between two processes with libsystemd's sd-bus: what a C daemon author
/// would use instead of a port for request/reply. The responder, a fork()ed child running only
/// C, exports object /bench with interface org.runloopkit.Bench and method `Echo(t) -> t`, and
/// serves it from an sd_bus_process/sd_bus_wait loop; the initiator calls it with
/// sd_bus_call_method, each call one sample, and checks every reply.
///
/// Peer to peer (`C sd-bus p2p`): the two ends of a socketpair, the responder a D-Bus server
/// (sd_bus_set_server), no broker — the shortest path sd-bus has. Through a broker
/// (`C sd-bus via dbus-daemon`): a private `dbus-daemon --session` started for the run, the
/// responder owning a well-known name on it — D-Bus as most daemons use it; each call crosses
/// three processes.
///
/// The same responder serves the `xlarge` workload's `Take(t seq, t bytes, ay data) -> t`, peer
/// to peer (`bench_sdbus_xlarge_open`, a `bench_xlarge_peer`): what a C daemon author would use to
/// hand a large buffer to another process over D-Bus, which copies it into the message and
/// through the socket.

#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>

#include "peer_support.h"

static const char *object_path = "/bench";
static const char *interface = "org.runloopkit.Bench";
static const char *well_known_name = "org.runloopkit.Bench";

/// The responder's exit statuses, turned into the initiator's failure strings.
enum {
    RESPONDER_DONE = 0,         // the initiator hung up (end of the run)
    RESPONDER_SETUP_FAILED = 1, // its bus could not be started or the object not exported
    RESPONDER_BAD_CALL = 2,     // a call with wrong arguments, or out of sequence
};

struct responder_state {
    bench_responder_cell *cell;
    uint64_t expected;
    int failed;
};

static int echo(sd_bus_message *call, void *userdata, sd_bus_error *error) {
    struct responder_state *state = userdata;
    uint64_t value;
    (void)error;
    if (sd_bus_message_read(call, "t", &value) < 0 || value != state->expected) {
        state->failed = 1;
        return -EINVAL;
    }
    bench_responder_cell_answer(state->cell, value);
    state->expected++;
    return sd_bus_reply_method_return(call, "t", value);
}

/// The xlarge workload's call: message `seq` of `bytes` bytes as an `ay` argument, read where
/// sd-bus received it (sd_bus_message_read_array: no copy of its own); the reply is the
/// acknowledgement of what was checked.
static int take(sd_bus_message *call, void *userdata, sd_bus_error *error) {
    struct responder_state *state = userdata;
    uint64_t seq, bytes;
    const void *data = NULL;
    size_t size = 0;
    (void)error;
    if (sd_bus_message_read(call, "tt", &seq, &bytes) < 0 || sd_bus_message_read_array(call, 'y', &data, &size) < 0 ||
        seq != state->expected || size != bytes || size == 0 ||
        ((const uint8_t *)data)[0] != bench_xlarge_first_byte(seq) ||
        ((const uint8_t *)data)[size - 1] != bench_xlarge_last_byte(seq)) {
        state->failed = 1;
        return -EINVAL;
    }
    bench_responder_cell_answer(state->cell, seq);
    state->expected++;
    return sd_bus_reply_method_return(call, "t", bench_xlarge_ack(seq, bytes, 0));
}

static const sd_bus_vtable bench_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("Echo", "t", "t", echo, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Take", "ttay", "t", take, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END
};

/// A started bus on `fd` (peer to peer: the server side when `server`), or on the broker at
/// `address`. NULL on failure.
static sd_bus *open_bus(int fd, int server, const char *address) {
    sd_bus *bus = NULL;
    if (sd_bus_new(&bus) < 0) return NULL;
    int rc;
    if (address != NULL) {
        rc = sd_bus_set_address(bus, address);
        if (rc >= 0) rc = sd_bus_set_bus_client(bus, 1);
    } else {
        rc = sd_bus_set_fd(bus, fd, fd);
        if (rc >= 0 && server) {
            sd_id128_t id;
            rc = sd_id128_randomize(&id);
            if (rc >= 0) rc = sd_bus_set_server(bus, 1, id);
        }
    }
    if (rc >= 0) rc = sd_bus_start(bus);
    if (rc < 0) {
        sd_bus_unref(bus);
        return NULL;
    }
    return bus;
}

/// The child: serves Echo until the initiator hangs up.
static _Noreturn void responder_main(int fd, const char *address, bench_responder_cell *cell) {
    struct responder_state state = { .cell = cell, .expected = 1, .failed = 0 };
    sd_bus *bus = open_bus(fd, 1, address);
    if (bus == NULL || sd_bus_add_object_vtable(bus, NULL, object_path, interface, bench_vtable, &state) < 0 ||
        (address != NULL && sd_bus_request_name(bus, well_known_name, 0) < 0)) {
        _exit(RESPONDER_SETUP_FAILED);
    }
    if (address != NULL) {
        // Tell the initiator the name is owned: one byte on the pipe it waits on.
        char ready = 1;
        if (write(fd, &ready, 1) != 1) _exit(RESPONDER_SETUP_FAILED);
    }
    for (;;) {
        int rc = sd_bus_process(bus, NULL);
        if (state.failed) _exit(RESPONDER_BAD_CALL);
        if (rc < 0) _exit(RESPONDER_DONE);   // the connection ended: the run is over
        if (rc > 0) continue;
        if (sd_bus_wait(bus, UINT64_MAX) < 0) _exit(RESPONDER_DONE);
    }
}

static const char *responder_failure(int status) {
    if (WIFSIGNALED(status)) return "C sd-bus: responder process was killed by a signal";
    switch (WEXITSTATUS(status)) {
    case RESPONDER_DONE: return NULL;
    case RESPONDER_SETUP_FAILED: return "C sd-bus: responder could not start its bus or export its object";
    case RESPONDER_BAD_CALL: return "C sd-bus: responder received a wrong call (arguments, bytes or sequence)";
    default: return "C sd-bus: responder process exited with an unexpected status";
    }
}

static int32_t responder_cpu(const void *context) {
    return bench_responder_cell_cpu(context);
}

/// Calls Echo(seq) for 1, 2, 3… until the recorder has its samples; returns the calls made.
static uint64_t initiate(sd_bus *bus, const char *destination, bench_latency_recorder *recorder,
                         bench_responder_cell *cell, const char **failure) {
    uint64_t sent = 0;
    for (uint64_t seq = 1;; seq++) {
        uint64_t t0 = bench_now_ns();
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        int rc = sd_bus_call_method(bus, destination, object_path, interface, "Echo", &error, &reply, "t", seq);
        sent = seq;
        uint64_t value = 0;
        if (rc >= 0) rc = sd_bus_message_read(reply, "t", &value);
        uint64_t t1 = bench_now_ns();
        sd_bus_message_unref(reply);
        sd_bus_error_free(&error);
        if (rc < 0 || value != seq) {
            *failure = "C sd-bus: the initiator's call failed or got a wrong reply";
            break;
        }
        int same = bench_current_cpu() == responder_cpu(cell);
        if (!bench_recorder_add(recorder, t1 - t0, same, t1)) break;
    }
    return sent;
}

/// Reaps `pid` (waitpid, EINTR-safe); NULL, or why the responder failed.
static const char *reap(pid_t pid) {
    int status = 0;
    pid_t reaped;
    while ((reaped = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {}
    return reaped == pid ? responder_failure(status) : "C sd-bus: waitpid failed";
}

void bench_sdbus_p2p_xprocess(const bench_latency_plan *plan, bench_latency_result *result) {
    bench_latency_recorder recorder;
    bench_recorder_init(&recorder, plan, result, 2);
    bench_responder_cell *cell = bench_responder_cell_create(NULL);
    if (cell == NULL) {
        result->failure = "C sd-bus: mmap of the shared responder cell failed";
        return;
    }
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
        bench_responder_cell_unmap(cell);
        result->failure = "C sd-bus: socketpair failed";
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        bench_responder_cell_unmap(cell);
        result->failure = "C sd-bus: fork failed";
        return;
    }
    if (pid == 0) {
        close(fds[0]);
        responder_main(fds[1], NULL, cell);
    }
    close(fds[1]);
    uint64_t sent = 0;
    sd_bus *bus = open_bus(fds[0], 0, NULL);
    if (bus == NULL) {
        result->failure = "C sd-bus: the initiator could not start its bus";
        close(fds[0]);
    } else {
        sent = initiate(bus, NULL, &recorder, cell, &result->failure);
        sd_bus_flush_close_unref(bus);   // closes fds[0]: the responder sees the end
    }
    const char *failure = reap(pid);
    uint64_t answered = bench_responder_cell_answered(cell);
    bench_responder_cell_unmap(cell);
    if (failure != NULL) result->failure = failure;
    else if (result->failure == NULL && answered != sent)
        result->failure = "C sd-bus: responder count does not match the calls made";
}

// ---- xlarge: Take(t, t, ay) -> t ------------------------------------------------------------

static void xlarge_responder(int fd, bench_responder_cell *cell) {
    responder_main(fd, NULL, cell);
}

/// One call: the message is built around a copy of the source's `bytes` bytes
/// (sd_bus_message_append_array), which sd-bus then writes to the socket.
static int xlarge_round(bench_xlarge_peer *peer, uint64_t seq, size_t bytes, const char **failure) {
    sd_bus *bus = peer->bus;
    peer->source[0] = bench_xlarge_first_byte(seq);
    peer->source[bytes - 1] = bench_xlarge_last_byte(seq);
    sd_bus_message *call = NULL, *reply = NULL;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    int rc = sd_bus_message_new_method_call(bus, &call, NULL, object_path, interface, "Take");
    if (rc >= 0) rc = sd_bus_message_append(call, "tt", seq, (uint64_t)bytes);
    if (rc >= 0) rc = sd_bus_message_append_array(call, 'y', peer->source, bytes);
    if (rc >= 0) rc = sd_bus_call(bus, call, 0, &error, &reply);
    uint64_t ack = 0;
    if (rc >= 0) rc = sd_bus_message_read(reply, "t", &ack);
    sd_bus_message_unref(call);
    sd_bus_message_unref(reply);
    sd_bus_error_free(&error);
    if (rc < 0 || ack != bench_xlarge_ack(seq, bytes, 0)) {
        *failure = "C sd-bus: the initiator's Take call failed or got a wrong acknowledgement";
        return 0;
    }
    return 1;
}

static void xlarge_hang_up(bench_xlarge_peer *peer) {
    sd_bus_flush_close_unref(peer->bus);  // closes the socket: the responder sees the end
}

bench_xlarge_peer *bench_sdbus_xlarge_open(const char **failure) {
    bench_xlarge_peer *peer = bench_xlarge_peer_fork("C sd-bus", SOCK_STREAM, xlarge_responder, failure);
    if (peer == NULL) return NULL;
    peer->responder_failure = responder_failure;
    peer->sends_source = 1;
    peer->round = xlarge_round;
    peer->hang_up = xlarge_hang_up;
    peer->bus = open_bus(peer->fd, 0, NULL);
    if (peer->bus == NULL) {
        // The peer is closed as any other: the responder sees the socket end and exits.
        close(peer->fd);
        peer->hang_up = NULL;
        const char *reason = bench_xlarge_close(peer);
        (void)reason;
        *failure = "C sd-bus: the initiator could not start its bus";
        return NULL;
    }
    return peer;
}

int bench_dbus_daemon_available(void) {
    const char *path = getenv("PATH");
    if (path == NULL) return 0;
    char candidate[4096];
    for (const char *start = path; *start != '\0';) {
        const char *end = strchr(start, ':');
        size_t length = end ? (size_t)(end - start) : strlen(start);
        if (length > 0 && length + sizeof "/dbus-daemon" < sizeof candidate) {
            memcpy(candidate, start, length);
            memcpy(candidate + length, "/dbus-daemon", sizeof "/dbus-daemon");
            if (access(candidate, X_OK) == 0) return 1;
        }
        if (end == NULL) break;
        start = end + 1;
    }
    return 0;
}

/// Starts `dbus-daemon --session --nofork --print-address=<pipe>` and reads its address into
/// `address`. Returns its pid, or -1.
static pid_t start_broker(char *address, size_t capacity) {
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(pipefd[0]);
        close(pipefd[1]);
        return -1;
    }
    if (pid == 0) {
        char option[64];
        snprintf(option, sizeof option, "--print-address=%d", pipefd[1]);
        fcntl(pipefd[1], F_SETFD, 0);   // kept across exec: the daemon writes its address there
        // Its complaints (it may not raise its descriptor limit as root without
        // CAP_SYS_RESOURCE) are not the benchmark's output.
        int quiet = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (quiet >= 0) dup2(quiet, STDERR_FILENO);
        execlp("dbus-daemon", "dbus-daemon", "--session", "--nofork", "--nopidfile", option, (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);
    size_t length = 0;
    ssize_t n;
    while (length + 1 < capacity && (n = read(pipefd[0], address + length, capacity - 1 - length)) != 0) {
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        length += (size_t)n;
        if (memchr(address, '\n', length) != NULL) break;
    }
    close(pipefd[0]);
    address[length] = '\0';
    char *newline = strchr(address, '\n');
    if (newline == NULL) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    *newline = '\0';
    return pid;
}

void bench_sdbus_broker_xprocess(const bench_latency_plan *plan, bench_latency_result *result) {
    bench_latency_recorder recorder;
    bench_recorder_init(&recorder, plan, result, 2);
    static char address[1024];
    pid_t broker = start_broker(address, sizeof address);
    if (broker < 0) {
        result->failure = "C sd-bus via dbus-daemon: dbus-daemon --session could not be started";
        return;
    }
    bench_responder_cell *cell = bench_responder_cell_create(NULL);
    int ready[2] = { -1, -1 };
    pid_t pid = -1;
    if (cell == NULL || pipe2(ready, O_CLOEXEC) != 0 || (pid = fork()) < 0) {
        result->failure = "C sd-bus via dbus-daemon: could not start the responder";
    } else if (pid == 0) {
        close(ready[0]);
        responder_main(ready[1], address, cell);
    } else {
        close(ready[1]);
        char byte;
        ssize_t n;
        while ((n = read(ready[0], &byte, 1)) < 0 && errno == EINTR) {}
        sd_bus *bus = n == 1 ? open_bus(-1, 0, address) : NULL;
        if (bus == NULL) {
            result->failure = "C sd-bus via dbus-daemon: the responder or the initiator could not join the bus";
        } else {
            uint64_t sent = initiate(bus, well_known_name, &recorder, cell, &result->failure);
            sd_bus_flush_close_unref(bus);
            // The responder's connection ends with the broker: its loop then returns.
            kill(broker, SIGTERM);
            const char *failure = reap(pid);
            pid = -1;
            if (failure != NULL) result->failure = failure;
            else if (result->failure == NULL && bench_responder_cell_answered(cell) != sent)
                result->failure = "C sd-bus via dbus-daemon: responder count does not match the calls made";
        }
    }
    if (ready[0] >= 0) close(ready[0]);
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    kill(broker, SIGTERM);
    waitpid(broker, NULL, 0);
    if (cell != NULL) bench_responder_cell_unmap(cell);
}
