#define _GNU_SOURCE
#include "CRunLoopKit.h"

#include <linux/futex.h>
#include <linux/membarrier.h>

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int has_pwait2 = 1;

/// `timeout_ns` as a relative timespec in `ts`; NULL (no limit) when it is negative.
static struct timespec *relative_timeout(int64_t timeout_ns, struct timespec *ts) {
    if (timeout_ns < 0) return NULL;
    ts->tv_sec = timeout_ns / 1000000000;
    ts->tv_nsec = timeout_ns % 1000000000;
    return ts;
}

int crlk_epoll_wait_ns(int epfd, struct epoll_event *events, int maxevents, int64_t timeout_ns) {
    if (__atomic_load_n(&has_pwait2, __ATOMIC_RELAXED)) {
        struct timespec ts;
        int n = (int)syscall(SYS_epoll_pwait2, epfd, events, maxevents, relative_timeout(timeout_ns, &ts), NULL, 0);
        if (n >= 0 || errno != ENOSYS) {
            return n;
        }
        __atomic_store_n(&has_pwait2, 0, __ATOMIC_RELAXED);
    }
    int timeout_ms = -1;
    if (timeout_ns >= 0) {
        /* Rounded up without adding first: timeout_ns may be INT64_MAX (a distant deadline). */
        int64_t ms = timeout_ns / 1000000 + (timeout_ns % 1000000 != 0);
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
    /* Without descriptors, send(2): the kernel copies no msghdr in. */
    if (nfds == 0) return send(fd, buf, len, flags);
    if (nfds > 256) {
        errno = EINVAL;
        return -1;
    }
    struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    char control[CMSG_SPACE(sizeof(int) * 256)];
    memset(control, 0, CMSG_SPACE(sizeof(int) * (size_t)nfds));
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
    memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * (size_t)nfds);
    return sendmsg(fd, &msg, flags);
}

#ifndef SCM_PIDFD
#define SCM_PIDFD 0x04
#endif

/* Moves the SCM_RIGHTS descriptors of `msg` into the record's `fds` (up to `maxfds`; extra
 * ones are closed), takes one SCM_CREDENTIALS into its credential fields and one SCM_PIDFD
 * into `pidfd`, and reports any other ancillary data (closing a pidfd that came as one). */
static void collect_fds(struct msghdr *msg, struct crlk_record *record, int maxfds) {
    int *fds = record->fds;
    int *nfds = &record->fd_count;
    int *unexpected_control = &record->unexpected_control;
    *nfds = 0;
    *unexpected_control = 0;
    record->has_credentials = 0;
    record->has_pidfd = 0;
    for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(msg); cmsg != NULL; cmsg = CMSG_NXTHDR(msg, cmsg)) {
        if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_CREDENTIALS
            && cmsg->cmsg_len == CMSG_LEN(sizeof(struct ucred)) && !record->has_credentials) {
            struct ucred credentials;
            memcpy(&credentials, CMSG_DATA(cmsg), sizeof credentials);
            record->has_credentials = 1;
            record->pid = credentials.pid;
            record->uid = credentials.uid;
            record->gid = credentials.gid;
        } else if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_PIDFD
                   && cmsg->cmsg_len == CMSG_LEN(sizeof(int))) {
            /* The receiving kernel writes it (a sender cannot): a pidfd, or minus the errno of
             * its failure to make one. */
            int pidfd;
            memcpy(&pidfd, CMSG_DATA(cmsg), sizeof pidfd);
            if (!record->has_pidfd) {
                record->has_pidfd = 1;
                record->pidfd = pidfd;
            } else {
                if (pidfd >= 0) close(pidfd);
                *unexpected_control = 1;
            }
        } else if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS) {
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

enum { max_records = 8, max_fds = 256 };

static int wanted_fds(const struct crlk_record *record) {
    return record->max_fds > max_fds ? max_fds : record->max_fds;
}

/* Room for the descriptors, one SCM_CREDENTIALS message and one SCM_PIDFD. */
static size_t control_space(const struct crlk_record *record) {
    return CMSG_SPACE(sizeof(int) * (size_t)wanted_fds(record)) + CMSG_SPACE(sizeof(struct ucred))
        + CMSG_SPACE(sizeof(int));
}

enum {
    control_capacity = CMSG_SPACE(sizeof(int) * max_fds) + CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int))
};

static void prepare(struct msghdr *header, struct iovec *iov, const struct crlk_record *record, char *control) {
    memset(header, 0, sizeof *header);
    iov->iov_base = record->buffer;
    iov->iov_len = record->capacity;
    header->msg_iov = iov;
    header->msg_iovlen = 1;
    header->msg_control = control;
    header->msg_controllen = control_space(record);
}

static void finish(struct crlk_record *record, struct msghdr *header, unsigned length) {
    record->length = length;
    record->msg_flags = header->msg_flags;
    collect_fds(header, record, wanted_fds(record));
}

int crlk_recvmmsg_fds(int fd, struct crlk_record *records, int count, int flags) {
    if (count == 1) {
        /* One record is one recvmsg(2), which costs less per call than recvmmsg(2), with
         * buffers sized for one record: the usual receive touches the least stack. */
        struct msghdr header;
        struct iovec iov;
        char control[control_capacity] __attribute__((aligned(8)));
        prepare(&header, &iov, &records[0], control);
        ssize_t length = recvmsg(fd, &header, flags | MSG_CMSG_CLOEXEC);
        if (length < 0) return -1;
        finish(&records[0], &header, (unsigned)length);
        return 1;
    }
    struct mmsghdr msgs[max_records];
    struct iovec iovs[max_records];
    char control[max_records][control_capacity] __attribute__((aligned(8)));
    if (count > max_records) count = max_records;
    for (int i = 0; i < count; i++) {
        prepare(&msgs[i].msg_hdr, &iovs[i], &records[i], control[i]);
        msgs[i].msg_len = 0;
    }
    int n = recvmmsg(fd, msgs, (unsigned)count, flags | MSG_CMSG_CLOEXEC, NULL);
    for (int i = 0; i < n; i++) finish(&records[i], &msgs[i].msg_hdr, msgs[i].msg_len);
    return n;
}

int crlk_futex_wait(uint32_t *word, uint32_t expected, int64_t timeout_ns) {
    struct timespec ts;
    return (int)syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, relative_timeout(timeout_ns, &ts), NULL, 0);
}

void crlk_futex_post(uint32_t *word, uint32_t value) {
    __atomic_store_n(word, value, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

long crlk_eventfd_ring(int fd) {
    uint64_t one = 1;
    return syscall(SYS_write, fd, &one, sizeof one);
}

int crlk_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    *pid = credentials.pid;
    *uid = credentials.uid;
    *gid = credentials.gid;
    return 0;
}

ssize_t crlk_send_with_credentials(int fd, const void *buf, size_t len, pid_t pid, uid_t uid, gid_t gid, int flags) {
    struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
    union {
        struct cmsghdr header;
        char bytes[CMSG_SPACE(sizeof(struct ucred))];
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.bytes;
    msg.msg_controllen = sizeof control.bytes;
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_CREDENTIALS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(struct ucred));
    struct ucred credentials = { .pid = pid, .uid = uid, .gid = gid };
    memcpy(CMSG_DATA(cmsg), &credentials, sizeof credentials);
    return sendmsg(fd, &msg, flags);
}

int crlk_pidfd_open(pid_t pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

int crlk_pidfd_send_signal(int pidfd, int signal) {
    return (int)syscall(SYS_pidfd_send_signal, pidfd, signal, NULL, 0);
}

int crlk_memfd_create_sealable(const char *name) {
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
    if (fd < 0 && errno == EINVAL) fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    return fd;
}

int crlk_memfd_add_seals(int fd, int seals) {
    return fcntl(fd, F_ADD_SEALS, seals);
}

int crlk_memfd_get_seals(int fd) {
    return fcntl(fd, F_GET_SEALS);
}

int crlk_accept_nonblocking(int fd) {
    return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int crlk_membarrier_register(void) {
    return (int)syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0);
}

int crlk_membarrier(void) {
    return (int)syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
}
