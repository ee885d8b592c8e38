/// Ping-pong between two sd_event loops (libsystemd), one per thread, the way a
/// systemd-style daemon would connect two of its threads: each loop has an io source
/// on its own non-blocking eventfd, and each handler reads the ping and writes the
/// pong to the other loop's eventfd. Between messages both loops sleep in epoll_wait.

#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <systemd/sd-event.h>

#include "peer_support.h"

typedef struct side {
    int in_fd, out_fd;          // read pings (or pongs) here; answer there
    _Atomic int cpu;
    uint64_t seq;               // initiator: the ping in flight; responder: pings handled
    uint64_t sent_ns;           // initiator: when that ping was written
    bench_latency_recorder *recorder;  // initiator only
    struct side *peer;
    const char *failure;
} side;

static int fail(sd_event_source *source, side *s, const char *failure, uint64_t poison_fd_value) {
    s->failure = failure;
    bench_write_u64(s->out_fd, poison_fd_value);
    return sd_event_exit(sd_event_source_get_event(source), -EPROTO);
}

static int on_ping(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
    (void)revents;
    side *s = userdata;
    uint64_t value;
    if (bench_read_u64(fd, &value) != 0)
        return fail(source, s, "C sd-event: responder read failed", BENCH_POISON_VALUE);
    if (value == BENCH_STOP_VALUE) return sd_event_exit(sd_event_source_get_event(source), 0);
    if (value != s->seq + 1)
        return fail(source, s, "C sd-event: responder received an out-of-sequence ping",
                    BENCH_POISON_VALUE);
    atomic_store_explicit(&s->cpu, bench_current_cpu(), memory_order_relaxed);
    s->seq++;
    bench_write_u64(s->out_fd, value);
    return 0;
}

static int on_pong(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
    (void)revents;
    side *s = userdata;
    uint64_t value;
    int rc = bench_read_u64(fd, &value);
    uint64_t now = bench_now_ns();
    if (rc != 0 || value != s->seq)
        return fail(source, s, "C sd-event: initiator received a wrong pong", BENCH_STOP_VALUE);
    int same = bench_current_cpu() == atomic_load_explicit(&s->peer->cpu, memory_order_relaxed);
    if (!bench_recorder_add(s->recorder, now - s->sent_ns, same, now)) {
        bench_write_u64(s->out_fd, BENCH_STOP_VALUE);
        return sd_event_exit(sd_event_source_get_event(source), 0);
    }
    s->seq++;
    s->sent_ns = bench_now_ns();
    bench_write_u64(s->out_fd, s->seq);
    return 0;
}

/// Creates this thread's loop with an io source on `s->in_fd` and runs it until a
/// handler exits it.
static int run_loop(side *s, sd_event_io_handler_t handler) {
    sd_event *loop = NULL;
    sd_event_source *source = NULL;
    int rc = sd_event_new(&loop);
    if (rc >= 0) rc = sd_event_add_io(loop, &source, s->in_fd, EPOLLIN, handler, s);
    if (rc >= 0 && handler == on_pong) {
        s->seq = 1;
        s->sent_ns = bench_now_ns();
        bench_write_u64(s->out_fd, s->seq);
    }
    if (rc >= 0) rc = sd_event_loop(loop);
    sd_event_source_unref(source);
    sd_event_unref(loop);
    return rc;
}

static void *responder_main(void *arg) {
    side *s = arg;
    if (run_loop(s, on_ping) < 0 && s->failure == NULL) s->failure = "C sd-event: responder loop failed";
    return NULL;
}

void bench_sdevent_pingpong(const bench_latency_plan *plan, bench_latency_result *result) {
    bench_latency_recorder recorder;
    bench_recorder_init(&recorder, plan, result, 2);
    int ping_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int pong_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    side initiator = { .in_fd = pong_fd, .out_fd = ping_fd, .recorder = &recorder };
    side responder = { .in_fd = ping_fd, .out_fd = pong_fd };
    initiator.peer = &responder;
    responder.peer = &initiator;
    pthread_t thread;
    if (ping_fd < 0 || pong_fd < 0 || pthread_create(&thread, NULL, responder_main, &responder) != 0) {
        result->failure = "C sd-event: setup failed";
        return;
    }
    if (run_loop(&initiator, on_pong) < 0 && initiator.failure == NULL) {
        initiator.failure = "C sd-event: initiator loop failed";
        bench_write_u64(ping_fd, BENCH_STOP_VALUE);
    }
    pthread_join(thread, NULL);
    close(ping_fd);
    close(pong_fd);
    if (responder.failure != NULL) result->failure = responder.failure;
    else if (initiator.failure != NULL) result->failure = initiator.failure;
    else if (responder.seq != initiator.seq)
        result->failure = "C sd-event: responder count does not match the pings sent";
}
