#define _GNU_SOURCE
#include "CFuzzSupport.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

/* SCM_MAX_FD: the kernel refuses more descriptors in one message. */
enum { most_fds = 253 };

ssize_t fuzz_sendmsg(int fd, const void *buf, size_t len, const int *fds, int nfds,
                     int with_credentials, pid_t pid, uid_t uid, gid_t gid, int flags) {
    if (nfds < 0 || nfds > most_fds) {
        errno = EINVAL;
        return -1;
    }
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(sizeof(int) * most_fds) + CMSG_SPACE(sizeof(struct ucred))];
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    size_t used = (nfds > 0 ? CMSG_SPACE(sizeof(int) * (size_t)nfds) : 0)
                + (with_credentials ? CMSG_SPACE(sizeof(struct ucred)) : 0);
    if (used > 0) {
        msg.msg_control = control.bytes;
        msg.msg_controllen = used;
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
        if (nfds > 0) {
            cmsg->cmsg_level = SOL_SOCKET;
            cmsg->cmsg_type = SCM_RIGHTS;
            cmsg->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
            memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * (size_t)nfds);
            cmsg = CMSG_NXTHDR(&msg, cmsg);
        }
        if (with_credentials) {
            struct ucred credentials = { .pid = pid, .uid = uid, .gid = gid };
            cmsg->cmsg_level = SOL_SOCKET;
            cmsg->cmsg_type = SCM_CREDENTIALS;
            cmsg->cmsg_len = CMSG_LEN(sizeof credentials);
            memcpy(CMSG_DATA(cmsg), &credentials, sizeof credentials);
        }
    }
    return sendmsg(fd, &msg, flags | MSG_NOSIGNAL);
}
