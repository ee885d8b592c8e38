#define _GNU_SOURCE
#include "CRunLoopKit.h"

#include <errno.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int has_pwait2 = 1;

int crlk_epoll_wait_ns(int epfd, struct epoll_event *events, int maxevents, int64_t timeout_ns) {
    if (__atomic_load_n(&has_pwait2, __ATOMIC_RELAXED)) {
        struct timespec ts;
        struct timespec *tsp = NULL;
        if (timeout_ns >= 0) {
            ts.tv_sec = timeout_ns / 1000000000;
            ts.tv_nsec = timeout_ns % 1000000000;
            tsp = &ts;
        }
        int n = (int)syscall(SYS_epoll_pwait2, epfd, events, maxevents, tsp, NULL, 0);
        if (n >= 0 || errno != ENOSYS) {
            return n;
        }
        __atomic_store_n(&has_pwait2, 0, __ATOMIC_RELAXED);
    }
    int timeout_ms = -1;
    if (timeout_ns >= 0) {
        int64_t ms = (timeout_ns + 999999) / 1000000;
        timeout_ms = ms > 0x7fffffff ? 0x7fffffff : (int)ms;
    }
    return epoll_wait(epfd, events, maxevents, timeout_ms);
}

pid_t crlk_gettid(void) {
    return (pid_t)syscall(SYS_gettid);
}

int crlk_set_current_thread_name(const char *name) {
    return pthread_setname_np(pthread_self(), name);
}
