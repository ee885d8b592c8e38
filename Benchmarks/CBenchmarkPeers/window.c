/// The credit window that bounds the unbounded Swift peers (see the header).
///
/// Sleeping and waking is a Dekker handshake: the sender publishes "I may sleep" and
/// then re-reads the in-flight count; the receiver publishes the new count and then
/// reads the flag. Both with sequentially consistent operations, so at least one of
/// them sees the other and a wake-up is never lost.

#include <stdatomic.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "peer_support.h"

struct bench_window {
    _Alignas(64) _Atomic uint32_t in_flight;
    _Alignas(64) _Atomic int sender_sleeping;
    int wake_fd;
    uint32_t limit;
};

bench_window *bench_window_new(uint32_t limit) {
    bench_window *window = aligned_alloc(64, sizeof *window);
    if (window == NULL) return NULL;
    atomic_init(&window->in_flight, 0);
    atomic_init(&window->sender_sleeping, 0);
    window->limit = limit;
    window->wake_fd = eventfd(0, EFD_CLOEXEC);
    if (window->wake_fd < 0) {
        free(window);
        return NULL;
    }
    return window;
}

void bench_window_free(bench_window *window) {
    close(window->wake_fd);
    free(window);
}

void bench_window_acquire(bench_window *window) {
    while (atomic_load_explicit(&window->in_flight, memory_order_acquire) >= window->limit) {
        atomic_store(&window->sender_sleeping, 1);
        if (atomic_load(&window->in_flight) >= window->limit) {
            uint64_t ignored;
            bench_read_u64(window->wake_fd, &ignored);
        }
        atomic_store_explicit(&window->sender_sleeping, 0, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&window->in_flight, 1, memory_order_relaxed);
}

void bench_window_release(bench_window *window) {
    uint32_t left = atomic_fetch_sub(&window->in_flight, 1) - 1;
    if (left <= window->limit / 2 && atomic_load(&window->sender_sleeping) &&
        atomic_exchange(&window->sender_sleeping, 0)) {
        bench_write_u64(window->wake_fd, 1);
    }
}
