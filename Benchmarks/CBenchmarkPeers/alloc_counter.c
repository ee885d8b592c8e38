/// Counts every heap allocation in the process by interposing glibc's allocator.
///
/// An executable's own definitions of malloc & co. take precedence over libc.so's for
/// every shared library loaded into the process (the Swift runtime, Foundation,
/// Dispatch, NIO), so defining them here sees all allocations without LD_PRELOAD or
/// malloc hooks (removed from glibc 2.34). Each one counts with relaxed atomics — the
/// benchmarks only ever read totals around a window — and forwards to glibc's
/// internal entry points, which are the real allocator.

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "CBenchmarkPeers.h"

extern void *__libc_malloc(size_t size);
extern void __libc_free(void *ptr);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

static _Atomic uint64_t allocation_count;
static _Atomic uint64_t allocated_bytes;

static inline void count(size_t size) {
    atomic_fetch_add_explicit(&allocation_count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&allocated_bytes, size, memory_order_relaxed);
}

bench_alloc_counts bench_alloc_snapshot(void) {
    bench_alloc_counts counts = {
        .allocations = atomic_load_explicit(&allocation_count, memory_order_relaxed),
        .bytes = atomic_load_explicit(&allocated_bytes, memory_order_relaxed),
    };
    return counts;
}

void *malloc(size_t size) {
    count(size);
    return __libc_malloc(size);
}

void free(void *ptr) {
    __libc_free(ptr);
}

void *calloc(size_t count_, size_t size) {
    count(count_ * size);
    return __libc_calloc(count_, size);
}

/// realloc counts as one allocation of the new size: it may move the block, and a
/// steady state that reallocates per message is exactly what the numbers must show.
void *realloc(void *ptr, size_t size) {
    count(size);
    return __libc_realloc(ptr, size);
}

void *memalign(size_t alignment, size_t size) {
    count(size);
    return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    count(size);
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
    count(size);
    void *ptr = __libc_memalign(alignment, size);
    if (ptr == NULL) return ENOMEM;
    *result = ptr;
    return 0;
}
