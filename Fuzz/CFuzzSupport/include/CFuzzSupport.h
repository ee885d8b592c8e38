#ifndef CFUZZSUPPORT_H
#define CFUZZSUPPORT_H

#include <stddef.h>
#include <sys/eventfd.h>
#include <sys/types.h>

/// sendmsg(2) of one record as a hostile peer would send it: `nfds` descriptors as one
/// SCM_RIGHTS message (none when 0) and, when `with_credentials` is set, an explicit
/// SCM_CREDENTIALS message claiming `pid`, `uid` and `gid` (the kernel refuses claims the
/// caller's privileges do not cover with EPERM). Blocking unless `flags` says otherwise.
/// Returns what sendmsg(2) returns; errno on failure.
ssize_t fuzz_sendmsg(int fd, const void *buf, size_t len, const int *fds, int nfds,
                     int with_credentials, pid_t pid, uid_t uid, gid_t gid, int flags);

/// A blocking AF_UNIX SOCK_SEQPACKET socket connected to the abstract address `name`
/// (`len` bytes, without the leading NUL). Returns the descriptor, or -1 with errno.
int fuzz_connect_abstract(const void *name, size_t len);

/// A blocking AF_UNIX SOCK_SEQPACKET socket bound to the abstract address `name` and
/// listening. Returns the descriptor, or -1 with errno.
int fuzz_listen_abstract(const void *name, size_t len);

#endif
