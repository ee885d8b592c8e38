#define _GNU_SOURCE
#include "CRunLoopKit.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
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

ssize_t crlk_sendmsg_fds(int fd, const void *buf, size_t len, const int *fds, int nfds, int flags) {
    struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    char control[CMSG_SPACE(sizeof(int) * 256)];
    if (nfds > 0) {
        if (nfds > 256) {
            errno = EINVAL;
            return -1;
        }
        memset(control, 0, CMSG_SPACE(sizeof(int) * (size_t)nfds));
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * (size_t)nfds);
    }
    return sendmsg(fd, &msg, flags);
}

/* Moves the SCM_RIGHTS descriptors of `msg` into `fds` (up to `maxfds`; extra ones are
 * closed) and reports any other ancillary data. */
static void collect_fds(struct msghdr *msg, int *fds, int maxfds, int *nfds, int *unexpected_control) {
    *nfds = 0;
    *unexpected_control = 0;
    for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(msg); cmsg != NULL; cmsg = CMSG_NXTHDR(msg, cmsg)) {
        if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS) {
            int count = (int)((cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < count; i++) {
                int received;
                memcpy(&received, CMSG_DATA(cmsg) + sizeof(int) * (size_t)i, sizeof(int));
                if (*nfds < maxfds) {
                    fds[(*nfds)++] = received;
                } else {
                    close(received);
                    *unexpected_control = 1;
                }
            }
        } else {
            *unexpected_control = 1;
        }
    }
}

int crlk_recvmmsg_fds(int fd, struct crlk_record *records, int count, int flags) {
    enum { max_records = 8, max_fds = 256 };
    struct mmsghdr msgs[max_records];
    struct iovec iovs[max_records];
    char control[max_records][CMSG_SPACE(sizeof(int) * max_fds)];
    if (count > max_records) count = max_records;
    memset(msgs, 0, sizeof(struct mmsghdr) * (size_t)count);
    for (int i = 0; i < count; i++) {
        int wanted = records[i].max_fds > max_fds ? max_fds : records[i].max_fds;
        iovs[i].iov_base = records[i].buffer;
        iovs[i].iov_len = records[i].capacity;
        msgs[i].msg_hdr.msg_iov = &iovs[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_control = control[i];
        msgs[i].msg_hdr.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)wanted);
    }
    /* One record is one recvmsg(2): recvmmsg(2) costs more per call for the same work. */
    int n;
    if (count == 1) {
        ssize_t length = recvmsg(fd, &msgs[0].msg_hdr, flags | MSG_CMSG_CLOEXEC);
        if (length >= 0) msgs[0].msg_len = (unsigned)length;
        n = length < 0 ? -1 : 1;
    } else {
        n = recvmmsg(fd, msgs, (unsigned)count, flags | MSG_CMSG_CLOEXEC, NULL);
    }
    for (int i = 0; i < n; i++) {
        int wanted = records[i].max_fds > max_fds ? max_fds : records[i].max_fds;
        records[i].length = msgs[i].msg_len;
        records[i].msg_flags = msgs[i].msg_hdr.msg_flags;
        collect_fds(&msgs[i].msg_hdr, records[i].fds, wanted, &records[i].fd_count, &records[i].unexpected_control);
    }
    return n;
}

long crlk_eventfd_ring(int fd) {
    uint64_t one = 1;
    return syscall(SYS_write, fd, &one, sizeof one);
}
