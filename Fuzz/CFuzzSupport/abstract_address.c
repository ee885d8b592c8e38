#define _GNU_SOURCE
#include "CFuzzSupport.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int make_address(struct sockaddr_un *address, socklen_t *length, const void *name, size_t len) {
    if (len + 1 > sizeof address->sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memset(address, 0, sizeof *address);
    address->sun_family = AF_UNIX;
    memcpy(address->sun_path + 1, name, len);
    *length = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
    return 0;
}

int fuzz_connect_abstract(const void *name, size_t len) {
    struct sockaddr_un address;
    socklen_t length;
    if (make_address(&address, &length, name, len) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&address, length) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int fuzz_listen_abstract(const void *name, size_t len) {
    struct sockaddr_un address;
    socklen_t length;
    if (make_address(&address, &length, name, len) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (bind(fd, (struct sockaddr *)&address, length) != 0 || listen(fd, 16) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}
