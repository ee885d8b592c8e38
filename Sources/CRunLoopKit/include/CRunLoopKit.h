#ifndef CRUNLOOPKIT_H
#define CRUNLOOPKIT_H

#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/vfs.h>
#include <time.h>

/// FUTEX_WAIT_PRIVATE: sleeps while `*word == expected`, at most `timeout_ns` (`< 0`: forever).
/// Returns 0 when woken, else -1 with errno EAGAIN (the word had changed), ETIMEDOUT or EINTR.
int crlk_futex_wait(uint32_t *word, uint32_t expected, int64_t timeout_ns);
/// Stores `value` in `*word` (sequentially consistent), then FUTEX_WAKE_PRIVATE one waiter.
void crlk_futex_post(uint32_t *word, uint32_t value);
/// A sequentially consistent store to a futex word.
static inline void crlk_futex_store(uint32_t *word, uint32_t value) { __atomic_store_n(word, value, __ATOMIC_SEQ_CST); }

/// CLOCK_BOOTTIME in nanoseconds: the clock Swift's ContinuousClock reads on Linux, read
/// through the vDSO without the runtime call and the 128-bit Duration arithmetic of `.now`.
static inline int64_t crlk_continuous_now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_BOOTTIME, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/// The x86-64 time-stamp counter (rdtsc, not serialising: callouts are timed to microseconds,
/// not cycles); 0 on other architectures, which time callouts with `crlk_continuous_now_ns`.
static inline uint64_t crlk_cycle_count(void) {
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#else
    return 0;
#endif
}

/// Keeps the compiler from moving memory accesses across it; the CPU still may (the other side
/// of such a pairing runs `crlk_membarrier`).
static inline void crlk_compiler_barrier(void) { __asm__ __volatile__("" ::: "memory"); }

/// membarrier(2) MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: 0 once this process may use
/// `crlk_membarrier`, else -1 with errno (ENOSYS, EINVAL: an older kernel; EPERM: a filter).
int crlk_membarrier_register(void);
/// membarrier(2) MEMBARRIER_CMD_PRIVATE_EXPEDITED: every thread of this process that is running
/// executes a full memory barrier before it returns. Registered first.
int crlk_membarrier(void);

/// epoll_pwait2 with a nanosecond timeout; `timeout_ns < 0` waits forever.
/// Falls back to epoll_wait (timeout rounded up to whole milliseconds) on kernels before 5.11.
int crlk_epoll_wait_ns(int epfd, struct epoll_event *events, int maxevents, int64_t timeout_ns);

/// Names the calling thread (pthread_setname_np, which glibc declares only under _GNU_SOURCE).
int crlk_set_current_thread_name(const char *name);

/// Adds 1 to an eventfd's counter with a raw write(2) system call, bypassing glibc's
/// cancellation-point wrapper (a doorbell ring is on every message hand-off's path).
/// Returns 8 on success, -1 with errno on failure.
long crlk_eventfd_ring(int fd);

/// The kernel thread id of the calling thread (gettid(2)).
pid_t crlk_gettid(void);

/// libdispatch's run-loop integration for the main queue (what CFRunLoop uses on Linux; exported
/// by libdispatch.so, declared only in its private headers). The handle is an eventfd that
/// libdispatch writes whenever the main queue gains work; the callback drains the queue and may
/// only be called on the main thread.
int _dispatch_get_main_queue_handle_4CF(void);
void _dispatch_main_queue_callback_4CF(void *ignored);

/// sendmsg(2) of one record with `nfds` descriptors as a single SCM_RIGHTS message; send(2)
/// when `nfds` is 0. Returns what the call returns; errno on failure.
ssize_t crlk_sendmsg_fds(int fd, const void *buf, size_t len, const int *fds, int nfds, int flags);

/// One record for `crlk_recvmmsg_fds`: the caller's buffers in, what arrived out.
struct crlk_record {
    void *buffer;
    size_t capacity;
    int *fds;
    int max_fds;
    size_t length;
    int fd_count;
    int msg_flags;
    int unexpected_control;
    /// 1 when the record came with one SCM_CREDENTIALS message (the receive end has
    /// SO_PASSCRED set): the kernel-verified pid, uid and gid of the process that sent it.
    int has_credentials;
    pid_t pid;
    uid_t uid;
    gid_t gid;
    /// 1 when the record came with one SCM_PIDFD message (the receive end has SO_PASSPIDFD set,
    /// Linux 6.5+): `pidfd` is then a close-on-exec pidfd of the sending process, now owned by
    /// the caller, or minus the errno of the kernel's failure to make one (ESRCH, EMFILE).
    int has_pidfd;
    int pidfd;
};

/// recvmmsg(2) of up to `count` (at most 8) records — recvmsg(2) when `count` is 1, which costs
/// less for the same work — into the callers' buffers, each with room for
/// up to `max_fds` SCM_RIGHTS descriptors (received close-on-exec; extra ones are closed and
/// flagged in `unexpected_control`, as is ancillary data other than SCM_RIGHTS, one
/// SCM_CREDENTIALS, whose pid/uid/gid fill the record's credential fields, and one SCM_PIDFD,
/// which fills `pidfd`; a descriptor that came in a second SCM_PIDFD is closed).
/// Returns how many arrived (fewer than `count` means none was left, with MSG_DONTWAIT),
/// or -1 with errno (EAGAIN when none was queued).
int crlk_recvmmsg_fds(int fd, struct crlk_record *records, int count, int flags);

/// The kernel-verified credentials of the peer of a connected AF_UNIX socket (SO_PEERCRED):
/// for a socket returned by connect(2), the process that called listen(2); for one returned
/// by accept(2), the process that called connect(2). Returns 0, or -1 with errno.
int crlk_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);

/// Sends one record with an explicit SCM_CREDENTIALS message claiming `pid`, `uid` and `gid`
/// (the kernel refuses claims the caller's privileges do not cover with EPERM). Returns what
/// sendmsg(2) returns.
ssize_t crlk_send_with_credentials(int fd, const void *buf, size_t len, pid_t pid, uid_t uid, gid_t gid, int flags);

/// pidfd_open(2) (Linux 5.3+; glibc declares no wrapper before 2.36): a close-on-exec pidfd
/// of process `pid`. Returns the descriptor, or -1 with errno (ESRCH: no such process).
int crlk_pidfd_open(pid_t pid);

/// pidfd_send_signal(2) (Linux 5.1+): sends `signal` to the process `pidfd` names — never to
/// another that reuses its pid. Returns 0, or -1 with errno (ESRCH once it has exited).
int crlk_pidfd_send_signal(int pidfd, int signal);

/// accept4(2) with SOCK_NONBLOCK | SOCK_CLOEXEC (glibc declares accept4 only under _GNU_SOURCE).
int crlk_accept_nonblocking(int fd);

/// The memfd seals (linux/fcntl.h, a stable ABI; Glibc's Swift module does not export them).
enum {
    CRLK_SEAL_SEAL = 0x0001,
    CRLK_SEAL_SHRINK = 0x0002,
    CRLK_SEAL_GROW = 0x0004,
    CRLK_SEAL_WRITE = 0x0008,
    CRLK_SEAL_FUTURE_WRITE = 0x0010,
};

/// memfd_create(2) with MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL, retried without
/// MFD_NOEXEC_SEAL when the kernel does not know it (EINVAL before Linux 6.3). Returns the
/// descriptor, or -1 with errno.
int crlk_memfd_create_sealable(const char *name);
/// fcntl(F_ADD_SEALS); 0, or -1 with errno (EPERM once F_SEAL_SEAL is set, EBUSY for
/// F_SEAL_WRITE while a writable shared mapping exists).
int crlk_memfd_add_seals(int fd, int seals);
/// fcntl(F_GET_SEALS): the seals, or -1 with errno (EINVAL: not a memfd or shmem file).
int crlk_memfd_get_seals(int fd);

/// The Swift runtime's demangler, its documented C interface (swift/SwiftDemangle.h, exported by
/// libswiftCore for tools): the demangled text of `mangledName` as a malloc'ed string, or NULL
/// when it is not a Swift symbol (with `outputBuffer` NULL and `flags` 0).
char *swift_demangle(const char *mangledName, size_t mangledNameLength, char *outputBuffer,
                     size_t *outputBufferSize, uint32_t flags);

/// Accessors for `struct epoll_event`, which is packed on x86_64 and awkward to touch from Swift.
static inline uint32_t crlk_epoll_event_events(const struct epoll_event *e) { return e->events; }
static inline uint64_t crlk_epoll_event_data(const struct epoll_event *e) { return e->data.u64; }

#endif
