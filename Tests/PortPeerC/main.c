/*
 * PortPeerC: an independent implementation of Protocols/port-message-frame.md (version 1),
 * written from the specification only, used by RunLoopKitTransportTests to check that the
 * Swift transport speaks the documented protocol and nothing else.
 *
 * Modes:
 *   PortPeerC request <sendRightFD> <expectedReplyText>
 *       Creates its own socketpair as a reply port, sends msgid 1000 with DATA
 *       "hello from C" and the reply port (REPLY_PORT, one descriptor), waits (10 s) for the
 *       reply on the reply port's receive end, validates it (spec section 5) and exits 0 only
 *       if it is msgid 1001 whose first component is DATA equal to <expectedReplyText>.
 *   PortPeerC serve <receiveFD>
 *       Reads one frame (10 s) from an inherited receive end. It must carry a reply port and
 *       a first DATA component T. Replies through the reply port with msgid (request + 1),
 *       components [DATA "C got: " T, PORT p] where p is a send right to a port of its own,
 *       then waits (10 s) on p for msgid (request + 2) with a DATA component and prints it.
 *       A request's metadata section (section 3.6) is echoed in the reply, as a peer that
 *       handles a request within its sender's trace context does; each field is printed
 *       ("metadata key=value").
 *   PortPeerC vectors <directory>
 *       Decodes every *.vector file of the directory with this decoder and checks it against
 *       the expectation; re-encodes the valid ones and compares the bytes.
 *   PortPeerC connect <name> <expectedReplyText>
 *       Connects to the named port <name> as Protocols/named-ports.md section 4.1 says (own
 *       scope, then the system's; the listener's uid checked), then does what `request` does
 *       over the connection.
 *   PortPeerC lie <name> [<pid>]
 *       Connects and sends HELLO with SCM_CREDENTIALS claiming pid <pid> (default 1); prints
 *       whether the kernel refused it and what the owner answered.
 *   PortPeerC forge <name> <pid>
 *       Connects (section 4.1), then sends one valid frame (msgid 9, DATA "forged") with
 *       SCM_CREDENTIALS claiming pid <pid>; prints "welcome", whether the kernel took the frame,
 *       and whether the owner then dropped the connection ("dropped").
 *   PortPeerC spawn-with-pid <pid> <path> [<args>...]
 *       Not a protocol peer: a test helper that needs C. Starts <path> as a child whose pid is
 *       <pid> (clone3 with set_tid: root only, and only while no process has that pid), prints
 *       "spawned <pid>" or "spawn failed: <errno name>", and waits for the child to exit.
 *   PortPeerC named-vectors <directory>
 *       Checks the address and handshake vectors of named-ports.md section 8.
 *   PortPeerC sealed <sendRightFD> <bytes>
 *       Section 3.5: writes <bytes> bytes (byte i = i * 7 + i / 4096, mod 256) into a memfd,
 *       seals it, and sends msgid 3900 with [DATA "sealed from C", MEMORY] and a reply port;
 *       waits (10 s) for msgid 3901 on the reply port, checks it (sections 5 and 5.4), maps its
 *       first MEMORY component and exits 0 only if it holds the same bytes.
 *
 * Output: one line per event on stdout ("received msgid=... data=..."), errors on stderr.
 * Exit status 0 on success, 1 on any mismatch or error.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* ---- Constants of the specification (section 3) --------------------------------------- */

#define RLK_HEADER_SIZE 16u
#define RLK_ENTRY_SIZE 8u
#define RLK_MAX_FRAME 65536u
#define RLK_MAX_COMPONENTS 64u
#define RLK_MAX_DESCRIPTORS (RLK_MAX_COMPONENTS + 1u)
#define RLK_VERSION 1u
#define RLK_FLAG_REPLY_PORT 0x01u
#define RLK_FLAG_METADATA 0x02u
#define RLK_FLAG_SEND_ONCE 0x04u /* only with REPLY_PORT (section 4.7) */
#define RLK_MAX_FIELDS 16u
#define RLK_MAX_KEY 256u
#define RLK_MAX_VALUE 4096u
#define RLK_KIND_DATA 1u
#define RLK_KIND_PORT 2u
#define RLK_KIND_MEMORY 3u
#define WAIT_MS 10000

static const uint8_t rlk_magic[4] = {0x52, 0x4C, 0x4B, 0x4D};

struct rlk_component {
    unsigned kind;        /* RLK_KIND_DATA, RLK_KIND_PORT or RLK_KIND_MEMORY */
    const uint8_t *bytes; /* DATA: points into the frame buffer (or caller's storage);
                             MEMORY: the read-only mapping once received (else NULL) */
    uint64_t length;      /* DATA, MEMORY: byte count; PORT: 0 */
    int fd;               /* PORT, MEMORY: the descriptor (-1 for decode-only use) */
};

/* One metadata field (section 3.6): UTF-8 key and value, pointing into a frame or caller's storage. */
struct rlk_field {
    const uint8_t *key;
    unsigned key_length;
    const uint8_t *value;
    unsigned value_length;
};

struct rlk_message {
    uint32_t msgid;
    int has_reply; /* 0: none; 1: a reply port; 2: a send-once reply port (section 4.7) */
    int reply_fd;
    unsigned count;
    struct rlk_component components[RLK_MAX_COMPONENTS];
    unsigned field_count; /* 0: no METADATA */
    struct rlk_field fields[RLK_MAX_FIELDS];
};

/* ---- Little-endian helpers ------------------------------------------------------------- */

static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static void put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v & 0xFFu);
    p[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)((v >> (8 * i)) & 0xFFu);
}

/* A MEMORY entry's length (section 3.2): 56 bits, the three bytes after the kind the high ones. */
static uint64_t memory_length(const uint8_t *entry) {
    return (uint64_t)get_u32(entry + 4) | ((uint64_t)entry[1] << 32) | ((uint64_t)entry[2] << 40) | ((uint64_t)entry[3] << 48);
}

/* ---- Decoder: section 5.2, checks F1..F11 in order ------------------------------------ */

/* Whether bytes[0..n) are well-formed UTF-8 (no overlongs, no surrogates, at most U+10FFFF). */
static int valid_utf8(const uint8_t *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t b = p[i];
        size_t extra;
        uint32_t min, cp;
        if (b < 0x80) { i++; continue; }
        if ((b & 0xE0) == 0xC0) { extra = 1; min = 0x80; cp = b & 0x1F; }
        else if ((b & 0xF0) == 0xE0) { extra = 2; min = 0x800; cp = b & 0x0F; }
        else if ((b & 0xF8) == 0xF0) { extra = 3; min = 0x10000; cp = b & 0x07; }
        else return 0;
        if (n - i <= extra) return 0;
        for (size_t k = 1; k <= extra; k++) {
            if ((p[i + k] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (p[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += extra + 1;
    }
    return 1;
}

/* Parses the metadata section `p[0..n)` (section 3.6, check F11) into `fields` (may be NULL);
 * returns the field count, or 0 when it is malformed. */
static unsigned rlk_parse_metadata(const uint8_t *p, size_t n, struct rlk_field *fields) {
    if (n < 2) return 0;
    unsigned count = get_u16(p);
    if (count < 1 || count > RLK_MAX_FIELDS) return 0;
    size_t offset = 2;
    for (unsigned i = 0; i < count; i++) {
        const uint8_t *strings[2];
        unsigned lengths[2];
        for (int part = 0; part < 2; part++) {
            if (n - offset < 2) return 0;
            unsigned length = get_u16(p + offset);
            offset += 2;
            if (part == 0 ? (length < 1 || length > RLK_MAX_KEY) : length > RLK_MAX_VALUE) return 0;
            if (n - offset < length || !valid_utf8(p + offset, length)) return 0;
            strings[part] = p + offset;
            lengths[part] = length;
            offset += length;
        }
        if (fields != NULL) {
            fields[i].key = strings[0];
            fields[i].key_length = lengths[0];
            fields[i].value = strings[1];
            fields[i].value_length = lengths[1];
        }
    }
    return offset == n ? count : 0;
}

/* Returns NULL when the frame is valid (and fills *out, DATA pointing into `frame`), else the
 * FrameError name of the first failing check. Descriptors are not touched. */
static const char *rlk_decode(const uint8_t *frame, size_t n, unsigned descriptors, struct rlk_message *out) {
    if (n > RLK_MAX_FRAME) return "frameTooLarge";                         /* F1 */
    if (n < RLK_HEADER_SIZE) return "truncatedHeader";                      /* F2 */
    if (memcmp(frame, rlk_magic, 4) != 0) return "badMagic";                /* F3 */
    if (frame[4] != RLK_VERSION) return "unsupportedVersion";               /* F4 */
    uint8_t flags = frame[5];
    if ((flags & ~(RLK_FLAG_REPLY_PORT | RLK_FLAG_METADATA | RLK_FLAG_SEND_ONCE)) != 0 ||
        ((flags & RLK_FLAG_SEND_ONCE) != 0 && (flags & RLK_FLAG_REPLY_PORT) == 0)) {
        return "reservedFlags"; /* F5 */
    }
    int metadata = (flags & RLK_FLAG_METADATA) != 0;
    unsigned count = get_u16(frame + 6);
    if (count > RLK_MAX_COMPONENTS) return "tooManyComponents";             /* F6 */
    uint32_t msgid = get_u32(frame + 8);
    uint32_t body = get_u32(frame + 12);
    size_t table_end = RLK_HEADER_SIZE + (size_t)RLK_ENTRY_SIZE * count;
    if (n < table_end || (metadata ? (uint64_t)(n - table_end) < (uint64_t)body
                                   : (uint64_t)(n - table_end) != (uint64_t)body)) return "lengthMismatch"; /* F7 */
    uint64_t sum = 0;
    unsigned ports = 0;
    for (unsigned i = 0; i < count; i++) {                                  /* F8 */
        const uint8_t *entry = frame + RLK_HEADER_SIZE + (size_t)RLK_ENTRY_SIZE * i;
        unsigned kind = entry[0];
        if (kind != RLK_KIND_DATA && kind != RLK_KIND_PORT && kind != RLK_KIND_MEMORY) return "badComponentKind";
        if (kind == RLK_KIND_MEMORY) {                                      /* F8d */
            if (memory_length(entry) == 0) return "memoryLength";
            ports++;
            continue;
        }
        if (entry[1] != 0 || entry[2] != 0 || entry[3] != 0) return "reservedBytes";
        uint32_t length = get_u32(entry + 4);
        if (kind == RLK_KIND_PORT && length != 0) return "portLength";
        if (kind == RLK_KIND_PORT) ports++;
        sum += length;
    }
    if (sum != (uint64_t)body) return "lengthMismatch";                     /* F9 */
    /* 0: no reply port; 1: a reply port; 2: a send-once reply port (section 4.7). */
    int reply = (flags & RLK_FLAG_REPLY_PORT) == 0 ? 0 : (flags & RLK_FLAG_SEND_ONCE) != 0 ? 2 : 1;
    if (descriptors != ports + (reply ? 1u : 0u)) return "descriptorCountMismatch"; /* F10: ports and memory */
    size_t body_end = table_end + body;
    unsigned fields = 0;
    if (metadata) {                                                          /* F11 */
        fields = rlk_parse_metadata(frame + body_end, n - body_end, out != NULL ? out->fields : NULL);
        if (fields == 0) return "badMetadata";
    }

    if (out != NULL) {
        out->msgid = msgid;
        out->has_reply = reply;
        out->reply_fd = -1;
        out->count = count;
        out->field_count = fields;
        size_t offset = table_end;
        for (unsigned i = 0; i < count; i++) {
            const uint8_t *entry = frame + RLK_HEADER_SIZE + (size_t)RLK_ENTRY_SIZE * i;
            struct rlk_component *c = &out->components[i];
            c->kind = entry[0];
            c->fd = -1;
            if (c->kind == RLK_KIND_MEMORY) {
                c->length = memory_length(entry);
                c->bytes = NULL;
                continue;
            }
            c->length = get_u32(entry + 4);
            c->bytes = frame + offset;
            offset += c->length;
        }
    }
    return NULL;
}

/* ---- Encoder: section 3 ---------------------------------------------------------------- */

/* Writes the frame of `m` into `out` (capacity RLK_MAX_FRAME). Returns its size, or 0 when the
 * message is too large to be sent (more than 64 components or more than 65536 bytes). */
static size_t rlk_encode(const struct rlk_message *m, uint8_t *out) {
    if (m->count > RLK_MAX_COMPONENTS) return 0;
    uint64_t body = 0;
    for (unsigned i = 0; i < m->count; i++) {
        if (m->components[i].kind == RLK_KIND_DATA) body += m->components[i].length;
    }
    if (m->field_count > RLK_MAX_FIELDS) return 0;
    uint64_t section = m->field_count > 0 ? 2 : 0;
    for (unsigned i = 0; i < m->field_count; i++) {
        section += 4 + (uint64_t)m->fields[i].key_length + m->fields[i].value_length;
    }
    uint64_t size = RLK_HEADER_SIZE + (uint64_t)RLK_ENTRY_SIZE * m->count + body + section;
    if (size > RLK_MAX_FRAME) return 0;
    memcpy(out, rlk_magic, 4);
    out[4] = (uint8_t)RLK_VERSION;
    out[5] = (uint8_t)((m->has_reply ? RLK_FLAG_REPLY_PORT : 0) | (m->has_reply == 2 ? RLK_FLAG_SEND_ONCE : 0) |
                       (m->field_count > 0 ? RLK_FLAG_METADATA : 0));
    put_u16(out + 6, (uint16_t)m->count);
    put_u32(out + 8, m->msgid);
    put_u32(out + 12, (uint32_t)body);
    size_t offset = RLK_HEADER_SIZE + (size_t)RLK_ENTRY_SIZE * m->count;
    for (unsigned i = 0; i < m->count; i++) {
        const struct rlk_component *c = &m->components[i];
        uint8_t *entry = out + RLK_HEADER_SIZE + (size_t)RLK_ENTRY_SIZE * i;
        entry[0] = (uint8_t)c->kind;
        uint64_t length = c->kind == RLK_KIND_PORT ? 0 : c->length;
        entry[1] = c->kind == RLK_KIND_MEMORY ? (uint8_t)(length >> 32) : 0;
        entry[2] = c->kind == RLK_KIND_MEMORY ? (uint8_t)(length >> 40) : 0;
        entry[3] = c->kind == RLK_KIND_MEMORY ? (uint8_t)(length >> 48) : 0;
        put_u32(entry + 4, (uint32_t)length);
        if (c->kind == RLK_KIND_DATA && c->length > 0) {
            memcpy(out + offset, c->bytes, (size_t)c->length);
            offset += c->length;
        }
    }
    if (m->field_count > 0) {
        put_u16(out + offset, (uint16_t)m->field_count);
        offset += 2;
        for (unsigned i = 0; i < m->field_count; i++) {
            const struct rlk_field *f = &m->fields[i];
            put_u16(out + offset, (uint16_t)f->key_length);
            memcpy(out + offset + 2, f->key, f->key_length);
            offset += 2 + f->key_length;
            put_u16(out + offset, (uint16_t)f->value_length);
            if (f->value_length > 0) memcpy(out + offset + 2, f->value, f->value_length);
            offset += 2 + f->value_length;
        }
    }
    return (size_t)size;
}

/* ---- Socket I/O: sections 4, 5.1, 5.3, 7 --------------------------------------------- */

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int is_send_right(int fd) {
    int domain = -1, type = -1;
    socklen_t len = sizeof domain;
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) return 0;
    len = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0) return 0;
    return domain == AF_UNIX && type == SOCK_SEQPACKET;
}

/* Sends `m` as one record: port descriptors in table order, then the reply port (section 4).
 * Waits for POLLOUT until `timeout_ms` when the buffer is full. Returns 0, or -1 with a
 * message on stderr. */
static int rlk_send(int fd, const struct rlk_message *m, int timeout_ms) {
    static uint8_t frame[RLK_MAX_FRAME];
    size_t size = rlk_encode(m, frame);
    if (size == 0) {
        fprintf(stderr, "PortPeerC: messageTooLarge (limit %u)\n", RLK_MAX_FRAME);
        return -1;
    }
    int fds[RLK_MAX_DESCRIPTORS];
    unsigned nfds = 0;
    for (unsigned i = 0; i < m->count; i++) {
        if (m->components[i].kind != RLK_KIND_DATA) fds[nfds++] = m->components[i].fd;
    }
    if (m->has_reply) fds[nfds++] = m->reply_fd;

    union {
        struct cmsghdr header;
        char bytes[CMSG_SPACE(sizeof(int) * RLK_MAX_DESCRIPTORS)];
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = {.iov_base = frame, .iov_len = size};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (nfds > 0) {
        msg.msg_control = control.bytes;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * nfds);
    }
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        ssize_t sent = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent == (ssize_t)size) return 0;
        if (sent >= 0) {
            fprintf(stderr, "PortPeerC: short send (%zd of %zu bytes)\n", sent, size);
            return -1;
        }
        if (errno == EINTR) continue;
        if (errno == EPIPE || errno == ECONNRESET) {
            fprintf(stderr, "PortPeerC: invalidPort (%s)\n", strerror(errno));
            return -1;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            fprintf(stderr, "PortPeerC: sendmsg: %s\n", strerror(errno));
            return -1;
        }
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            fprintf(stderr, "PortPeerC: timedOut\n");
            return -1;
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT, .revents = 0};
        int r = poll(&p, 1, (int)left);
        if (r > 0 && (p.revents & (POLLHUP | POLLERR)) != 0 && (p.revents & POLLOUT) == 0) {
            fprintf(stderr, "PortPeerC: invalidPort (hang-up while waiting)\n");
            return -1;
        }
    }
}

static void close_all(int *fds, unsigned n) {
    for (unsigned i = 0; i < n; i++) {
        if (fds[i] >= 0) close(fds[i]);
        fds[i] = -1;
    }
}

/* Section 5.4 M1-M3 for a MEMORY component's descriptor: a memfd (a regular file whose seals
 * can be read), sealed against writing, shrinking and growing (a mask: other seals may be set,
 * and F_SEAL_FUTURE_WRITE does not count), at least `length` bytes. NULL when it passes. */
static const char *check_memory(int fd, uint64_t length) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return "descriptorNotMemory";   /* M1 */
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0) return "descriptorNotMemory";                                        /* M1 */
    int needed = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW;
    if ((seals & needed) != needed) return "memoryNotSealed";                           /* M2 */
    if ((uint64_t)st.st_size < length) return "memoryTooSmall";                         /* M3 */
    return NULL;
}

/* Waits up to `timeout_ms` for one record on `fd` and validates it (sections 5 and 6).
 * `buffer` holds RLK_MAX_FRAME bytes. On success fills *m (DATA points into `buffer`, PORT and
 * reply descriptors are owned by the caller) and returns 0. On a malformed frame closes every
 * received descriptor, prints the reason and returns -1; also -1 on timeout or end of stream. */
static int rlk_receive(int fd, uint8_t *buffer, struct rlk_message *m, int timeout_ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN, .revents = 0};
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            fprintf(stderr, "PortPeerC: no frame within %d ms\n", timeout_ms);
            return -1;
        }
        int r = poll(&p, 1, (int)left);
        if (r > 0) break;
        if (r < 0 && errno != EINTR) {
            perror("PortPeerC: poll");
            return -1;
        }
    }
    union {
        struct cmsghdr header;
        char bytes[CMSG_SPACE(sizeof(int) * RLK_MAX_DESCRIPTORS)];
    } control;
    struct iovec iov = {.iov_base = buffer, .iov_len = RLK_MAX_FRAME};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.bytes;
    msg.msg_controllen = sizeof control.bytes;
    ssize_t n;
    do {
        n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        perror("PortPeerC: recvmsg");
        return -1;
    }

    /* Collect every descriptor first, so that any rejection below can close them all. */
    int fds[256];
    unsigned nfds = 0;
    int unexpected = 0, rights_messages = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            rights_messages++;
            size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < count; i++) {
                int received;
                memcpy(&received, CMSG_DATA(c) + sizeof(int) * i, sizeof(int));
                if (nfds < sizeof fds / sizeof fds[0]) {
                    fds[nfds++] = received;
                } else {
                    close(received);
                    unexpected = 1;
                }
            }
        } else {
            unexpected = 1;
        }
    }
    if (rights_messages > 1) unexpected = 1;

    if (n == 0 && nfds == 0 && (msg.msg_flags & MSG_TRUNC) == 0) {
        fprintf(stderr, "PortPeerC: end of stream\n");
        return -1;
    }
    const char *reason = NULL;
    if (msg.msg_flags & MSG_TRUNC) {
        reason = "truncated";                                  /* K1 */
    } else if (msg.msg_flags & MSG_CTRUNC) {
        reason = "descriptorsTruncated";                       /* K2 */
    } else if (unexpected) {
        reason = "unexpectedControlMessage";                   /* K3 */
    } else {
        reason = rlk_decode(buffer, (size_t)n, nfds, m);       /* F1..F10 */
        /* Section 5.4, descriptor by descriptor in table order, the reply port last. */
        unsigned next = 0;
        for (unsigned i = 0; reason == NULL && i < m->count; i++) {
            if (m->components[i].kind == RLK_KIND_PORT && !is_send_right(fds[next++])) reason = "descriptorNotAPort"; /* D1 */
            if (m->components[i].kind == RLK_KIND_MEMORY) reason = check_memory(fds[next++], m->components[i].length);
        }
        if (reason == NULL && m->has_reply && !is_send_right(fds[next])) reason = "descriptorNotAPort";
    }
    if (reason != NULL) {
        close_all(fds, nfds);
        fprintf(stderr, "PortPeerC: malformed frame: %s\n", reason);
        return -1;
    }
    unsigned next = 0;
    for (unsigned i = 0; i < m->count; i++) {
        struct rlk_component *c = &m->components[i];
        if (c->kind == RLK_KIND_DATA) continue;
        c->fd = fds[next++];
        if (c->kind == RLK_KIND_MEMORY) {
            /* MAP_PRIVATE, PROT_READ: the seals guarantee it can neither change nor shrink. */
            void *mapped = mmap(NULL, (size_t)c->length, PROT_READ, MAP_PRIVATE, c->fd, 0);
            if (mapped == MAP_FAILED) {
                perror("PortPeerC: mmap");
                c->bytes = NULL;
            } else {
                c->bytes = mapped;
            }
        }
    }
    if (m->has_reply) m->reply_fd = fds[next++];
    return 0;
}

static void release_ports(struct rlk_message *m) {
    for (unsigned i = 0; i < m->count; i++) {
        struct rlk_component *c = &m->components[i];
        if (c->kind == RLK_KIND_MEMORY && c->bytes != NULL) {
            munmap((void *)c->bytes, (size_t)c->length);
            c->bytes = NULL;
        }
        if (c->kind != RLK_KIND_DATA && c->fd >= 0) {
            close(c->fd);
            c->fd = -1;
        }
    }
    if (m->has_reply && m->reply_fd >= 0) {
        close(m->reply_fd);
        m->reply_fd = -1;
    }
}

static void print_message(const char *what, const struct rlk_message *m) {
    printf("%s msgid=%u reply=%s components=%u", what, m->msgid,
           m->has_reply == 2 ? "send-once" : m->has_reply ? "true" : "false", m->count);
    for (unsigned i = 0; i < m->count; i++) {
        const struct rlk_component *c = &m->components[i];
        if (c->kind == RLK_KIND_DATA) {
            printf(" data=\"%.*s\"", (int)c->length, (const char *)c->bytes);
        } else if (c->kind == RLK_KIND_MEMORY) {
            printf(" memory=%llu", (unsigned long long)c->length);
        } else {
            printf(" port");
        }
    }
    printf("\n");
    fflush(stdout);
}

static int make_port(int fds[2]) {
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) != 0) {
        perror("PortPeerC: socketpair");
        return -1;
    }
    return 0;
}

static int parse_fd(const char *text) {
    char *end = NULL;
    long value = strtol(text, &end, 10);
    if (end == text || *end != '\0' || value < 0 || value > 1000000) return -1;
    return (int)value;
}

static int data_equals(const struct rlk_component *c, const char *text) {
    size_t len = strlen(text);
    return c->kind == RLK_KIND_DATA && c->length == len && memcmp(c->bytes, text, len) == 0;
}

/* ---- Mode: request ----------------------------------------------------------------------- */

static int mode_request(int send_right, const char *expected) {
    static uint8_t buffer[RLK_MAX_FRAME];
    if (!is_send_right(send_right)) {
        fprintf(stderr, "PortPeerC: fd %d is not a send right\n", send_right);
        return 1;
    }
    int reply[2];
    if (make_port(reply) != 0) return 1;

    static const char hello[] = "hello from C";
    struct rlk_message request;
    memset(&request, 0, sizeof request);
    request.msgid = 1000;
    request.count = 1;
    request.components[0].kind = RLK_KIND_DATA;
    request.components[0].bytes = (const uint8_t *)hello;
    request.components[0].length = (uint32_t)strlen(hello);
    request.components[0].fd = -1;
    request.has_reply = 1;
    request.reply_fd = reply[1];
    if (rlk_send(send_right, &request, WAIT_MS) != 0) return 1;
    close(reply[1]); /* the receiver has its own copy now */
    printf("sent msgid=1000 data=\"%s\" reply=true\n", hello);
    fflush(stdout);

    struct rlk_message answer;
    memset(&answer, 0, sizeof answer);
    if (rlk_receive(reply[0], buffer, &answer, WAIT_MS) != 0) return 1;
    print_message("received", &answer);
    int ok = answer.msgid == 1001 && answer.count >= 1 && data_equals(&answer.components[0], expected);
    if (!ok) fprintf(stderr, "PortPeerC: reply is not msgid 1001 with DATA \"%s\"\n", expected);
    release_ports(&answer);
    close(reply[0]);
    close(send_right);
    return ok ? 0 : 1;
}

/* ---- Mode: sealed (section 3.5) ----------------------------------------------------------- */

static uint8_t pattern_byte(uint64_t i) { return (uint8_t)(i * 7 + i / 4096); }

static int mode_sealed(int send_right, uint64_t size) {
    static uint8_t buffer[RLK_MAX_FRAME];
    if (!is_send_right(send_right) || size == 0) {
        fprintf(stderr, "PortPeerC: fd %d is not a send right, or no size\n", send_right);
        return 1;
    }
    int memory = memfd_create("portpeerc", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (memory < 0 || ftruncate(memory, (off_t)size) != 0) {
        perror("PortPeerC: memfd");
        return 1;
    }
    uint8_t *writable = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, memory, 0);
    if (writable == MAP_FAILED) {
        perror("PortPeerC: mmap");
        return 1;
    }
    for (uint64_t i = 0; i < size; i++) writable[i] = pattern_byte(i);
    /* F_SEAL_WRITE is refused while a writable shared mapping exists. */
    munmap(writable, (size_t)size);
    if (fcntl(memory, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        perror("PortPeerC: F_ADD_SEALS");
        return 1;
    }
    int reply[2];
    if (make_port(reply) != 0) return 1;
    static const char text[] = "sealed from C";
    struct rlk_message request;
    memset(&request, 0, sizeof request);
    request.msgid = 3900;
    request.count = 2;
    request.components[0] = (struct rlk_component){RLK_KIND_DATA, (const uint8_t *)text, strlen(text), -1};
    request.components[1] = (struct rlk_component){RLK_KIND_MEMORY, NULL, size, memory};
    request.has_reply = 1;
    request.reply_fd = reply[1];
    if (rlk_send(send_right, &request, WAIT_MS) != 0) return 1;
    close(reply[1]);
    close(memory); /* the receiver has its own copy now */
    printf("sent msgid=3900 memory=%llu\n", (unsigned long long)size);
    fflush(stdout);

    struct rlk_message answer;
    memset(&answer, 0, sizeof answer);
    if (rlk_receive(reply[0], buffer, &answer, WAIT_MS) != 0) return 1;
    print_message("received", &answer);
    int ok = answer.msgid == 3901 && answer.count >= 1 && answer.components[0].kind == RLK_KIND_MEMORY
        && answer.components[0].length == size && answer.components[0].bytes != NULL;
    for (uint64_t i = 0; ok && i < size; i++) ok = answer.components[0].bytes[i] == pattern_byte(i);
    if (!ok) fprintf(stderr, "PortPeerC: reply is not msgid 3901 with MEMORY holding the %llu bytes sent\n", (unsigned long long)size);
    else printf("memory intact\n");
    release_ports(&answer);
    close(reply[0]);
    close(send_right);
    return ok ? 0 : 1;
}

/* ---- Mode: serve ------------------------------------------------------------------------- */

static int mode_serve(int receive_end) {
    static uint8_t buffer[RLK_MAX_FRAME];
    static uint8_t text[RLK_MAX_FRAME];
    struct rlk_message request;
    memset(&request, 0, sizeof request);
    if (rlk_receive(receive_end, buffer, &request, WAIT_MS) != 0) return 1;
    print_message("received", &request);
    for (unsigned i = 0; i < request.field_count; i++) {
        const struct rlk_field *f = &request.fields[i];
        printf("metadata %.*s=%.*s\n", (int)f->key_length, (const char *)f->key, (int)f->value_length,
               (const char *)f->value);
    }
    if (!request.has_reply || request.count < 1 || request.components[0].kind != RLK_KIND_DATA) {
        fprintf(stderr, "PortPeerC: expected a reply port and a first DATA component\n");
        release_ports(&request);
        return 1;
    }
    static const char prefix[] = "C got: ";
    size_t prefix_len = strlen(prefix);
    size_t text_len = request.components[0].length;
    if (prefix_len + text_len > 1024) text_len = 1024 - prefix_len;
    memcpy(text, prefix, prefix_len);
    memcpy(text + prefix_len, request.components[0].bytes, text_len);

    int own[2];
    if (make_port(own) != 0) return 1;
    struct rlk_message reply;
    memset(&reply, 0, sizeof reply);
    reply.msgid = request.msgid + 1;
    reply.count = 2;
    reply.components[0].kind = RLK_KIND_DATA;
    reply.components[0].bytes = text;
    reply.components[0].length = (uint32_t)(prefix_len + text_len);
    reply.components[0].fd = -1;
    reply.components[1].kind = RLK_KIND_PORT;
    reply.components[1].fd = own[1];
    /* The reply carries the request's context (the fields still point into `buffer`). */
    reply.field_count = request.field_count;
    memcpy(reply.fields, request.fields, sizeof(struct rlk_field) * request.field_count);
    int reply_port = request.reply_fd;
    uint32_t expected_next = request.msgid + 2;
    if (rlk_send(reply_port, &reply, WAIT_MS) != 0) return 1;
    close(own[1]);
    release_ports(&request);
    printf("replied msgid=%u data=\"%.*s\" port\n", reply.msgid, (int)reply.components[0].length, (const char *)text);
    fflush(stdout);

    struct rlk_message follow;
    memset(&follow, 0, sizeof follow);
    if (rlk_receive(own[0], buffer, &follow, WAIT_MS) != 0) return 1;
    print_message("received", &follow);
    int ok = follow.msgid == expected_next && follow.count >= 1 && follow.components[0].kind == RLK_KIND_DATA;
    if (!ok) fprintf(stderr, "PortPeerC: expected msgid %u with a DATA component on the port sent\n", expected_next);
    release_ports(&follow);
    close(own[0]);
    close(receive_end);
    return ok ? 0 : 1;
}

/* ---- Mode: vectors (section 9) ------------------------------------------------------------ */

struct vector {
    uint8_t *frame;
    size_t size;
    unsigned descriptors;
    int expect_ok;
    char reason[64];
    int has_msgid, has_reply;
    uint32_t msgid;
    int reply;
    unsigned count;
    struct rlk_component components[RLK_MAX_COMPONENTS + 1];
    unsigned field_count;
    struct rlk_field fields[RLK_MAX_FIELDS + 1];
    uint8_t *storage; /* bytes of the expected DATA components and metadata fields */
    size_t stored;
};

static int hex_value(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Appends the hex bytes of `text` (whitespace ignored) to `out`; returns the count or -1. */
static long parse_hex(const char *text, uint8_t *out, size_t capacity) {
    size_t n = 0;
    int high = -1;
    for (const char *p = text; *p; p++) {
        if (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') continue;
        int v = hex_value((unsigned char)*p);
        if (v < 0) return -1;
        if (high < 0) {
            high = v;
        } else {
            if (n >= capacity) return -1;
            out[n++] = (uint8_t)(high << 4 | v);
            high = -1;
        }
    }
    return high < 0 ? (long)n : -1;
}

static int parse_repeat(const char *text, unsigned *byte, unsigned long *count) {
    char hex[3] = {0};
    if (sscanf(text, " %2s %lu", hex, count) != 2 || hex_value((unsigned char)hex[0]) < 0 ||
        hex_value((unsigned char)hex[1]) < 0) {
        return -1;
    }
    *byte = (unsigned)(hex_value((unsigned char)hex[0]) << 4 | hex_value((unsigned char)hex[1]));
    return 0;
}

#define VECTOR_CAPACITY (2u * RLK_MAX_FRAME)

static int parse_vector(const char *path, struct vector *v) {
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    static char line[1 << 18];
    int line_number = 0, ok = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        line_number++;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0' || line[0] == '#') continue;
        char *colon = strchr(line, ':');
        if (colon == NULL) goto bad;
        *colon = '\0';
        const char *key = line, *arg = colon + 1;
        while (*arg == ' ' || *arg == '\t') arg++;
        if (strcmp(key, "frame") == 0) {
            long n = parse_hex(arg, v->frame + v->size, VECTOR_CAPACITY - v->size);
            if (n < 0) goto bad;
            v->size += (size_t)n;
        } else if (strcmp(key, "repeat") == 0) {
            unsigned byte;
            unsigned long count;
            if (parse_repeat(arg, &byte, &count) != 0 || count > VECTOR_CAPACITY - v->size) goto bad;
            memset(v->frame + v->size, (int)byte, count);
            v->size += count;
        } else if (strcmp(key, "descriptors") == 0) {
            v->descriptors = (unsigned)strtoul(arg, NULL, 10);
        } else if (strcmp(key, "expect") == 0) {
            if (strcmp(arg, "ok") == 0) {
                v->expect_ok = 1;
            } else if (sscanf(arg, "error %63s", v->reason) == 1) {
                v->expect_ok = 0;
            } else {
                goto bad;
            }
            ok = 1;
        } else if (strcmp(key, "msgid") == 0) {
            v->msgid = (uint32_t)strtoul(arg, NULL, 10);
            v->has_msgid = 1;
        } else if (strcmp(key, "reply") == 0) {
            if (strcmp(arg, "true") == 0) v->reply = 1;
            else if (strcmp(arg, "false") == 0) v->reply = 0;
            else if (strcmp(arg, "send-once") == 0) v->reply = 2;
            else goto bad;
            v->has_reply = 1;
        } else if (strcmp(key, "metadata") == 0) {
            /* KEYHEX VALUEHEX, VALUE "-" when empty */
            if (v->field_count >= RLK_MAX_FIELDS) goto bad;
            char key_hex[2 * RLK_MAX_KEY + 1], value_hex[2 * RLK_MAX_VALUE + 1];
            if (sscanf(arg, "%512s %8192s", key_hex, value_hex) != 2) goto bad;
            struct rlk_field *field = &v->fields[v->field_count++];
            long k = parse_hex(key_hex, v->storage + v->stored, VECTOR_CAPACITY - v->stored);
            if (k < 0) goto bad;
            field->key = v->storage + v->stored;
            field->key_length = (unsigned)k;
            v->stored += (size_t)k;
            long n = strcmp(value_hex, "-") == 0 ? 0 : parse_hex(value_hex, v->storage + v->stored, VECTOR_CAPACITY - v->stored);
            if (n < 0) goto bad;
            field->value = v->storage + v->stored;
            field->value_length = (unsigned)n;
            v->stored += (size_t)n;
        } else if (strcmp(key, "component") == 0) {
            if (v->count > RLK_MAX_COMPONENTS) goto bad;
            struct rlk_component *c = &v->components[v->count++];
            c->fd = -1;
            if (strcmp(arg, "port") == 0) {
                c->kind = RLK_KIND_PORT;
                c->length = 0;
                c->bytes = NULL;
            } else if (strncmp(arg, "memory ", 7) == 0) {
                c->kind = RLK_KIND_MEMORY;
                c->length = strtoull(arg + 7, NULL, 10);
                c->bytes = NULL;
            } else if (strncmp(arg, "data-repeat", 11) == 0) {
                unsigned byte;
                unsigned long count;
                if (parse_repeat(arg + 11, &byte, &count) != 0 || count > VECTOR_CAPACITY - v->stored) goto bad;
                c->kind = RLK_KIND_DATA;
                c->bytes = v->storage + v->stored;
                c->length = (uint32_t)count;
                memset(v->storage + v->stored, (int)byte, count);
                v->stored += count;
            } else if (strncmp(arg, "data", 4) == 0) {
                long n = parse_hex(arg + 4, v->storage + v->stored, VECTOR_CAPACITY - v->stored);
                if (n < 0) goto bad;
                c->kind = RLK_KIND_DATA;
                c->bytes = v->storage + v->stored;
                c->length = (uint32_t)n;
                v->stored += (size_t)n;
            } else {
                goto bad;
            }
        } else {
            goto bad;
        }
    }
    fclose(f);
    if (!ok || (v->expect_ok && (!v->has_msgid || !v->has_reply))) {
        fprintf(stderr, "%s: missing expect/msgid/reply\n", path);
        return -1;
    }
    return 0;
bad:
    fprintf(stderr, "%s:%d: cannot parse\n", path, line_number);
    fclose(f);
    return -1;
}

static int check_vector(const char *path) {
    static uint8_t frame[VECTOR_CAPACITY], storage[VECTOR_CAPACITY], encoded[RLK_MAX_FRAME];
    static struct vector v;
    memset(&v, 0, sizeof v);
    v.frame = frame;
    v.storage = storage;
    if (parse_vector(path, &v) != 0) return -1;

    static struct rlk_message m;
    memset(&m, 0, sizeof m);
    const char *reason = rlk_decode(v.frame, v.size, v.descriptors, &m);
    if (!v.expect_ok) {
        if (reason == NULL || strcmp(reason, v.reason) != 0) {
            fprintf(stderr, "%s: expected error %s, got %s\n", path, v.reason, reason ? reason : "ok");
            return -1;
        }
        return 0;
    }
    if (reason != NULL) {
        fprintf(stderr, "%s: expected ok, got error %s\n", path, reason);
        return -1;
    }
    if (m.msgid != v.msgid || m.has_reply != v.reply || m.count != v.count) {
        fprintf(stderr, "%s: decoded msgid %u reply %d count %u; expected %u %d %u\n", path, m.msgid,
                m.has_reply, m.count, v.msgid, v.reply, v.count);
        return -1;
    }
    if (m.field_count != v.field_count) {
        fprintf(stderr, "%s: decoded %u metadata fields, expected %u\n", path, m.field_count, v.field_count);
        return -1;
    }
    for (unsigned i = 0; i < m.field_count; i++) {
        const struct rlk_field *a = &m.fields[i], *b = &v.fields[i];
        if (a->key_length != b->key_length || a->value_length != b->value_length ||
            memcmp(a->key, b->key, a->key_length) != 0 || memcmp(a->value, b->value, a->value_length) != 0) {
            fprintf(stderr, "%s: metadata field %u differs\n", path, i);
            return -1;
        }
    }
    for (unsigned i = 0; i < m.count; i++) {
        const struct rlk_component *a = &m.components[i], *b = &v.components[i];
        if (a->kind != b->kind || a->length != b->length ||
            (a->kind == RLK_KIND_DATA && a->length > 0 && memcmp(a->bytes, b->bytes, (size_t)a->length) != 0)) {
            fprintf(stderr, "%s: component %u differs\n", path, i);
            return -1;
        }
    }
    /* Encode the expected message (not the decoded one) and compare with the vector's bytes. */
    struct rlk_message expected;
    memset(&expected, 0, sizeof expected);
    expected.msgid = v.msgid;
    expected.has_reply = v.reply;
    expected.reply_fd = -1;
    expected.count = v.count;
    memcpy(expected.components, v.components, sizeof(struct rlk_component) * v.count);
    expected.field_count = v.field_count;
    memcpy(expected.fields, v.fields, sizeof(struct rlk_field) * v.field_count);
    size_t size = rlk_encode(&expected, encoded);
    if (size != v.size || memcmp(encoded, v.frame, size) != 0) {
        fprintf(stderr, "%s: re-encoding differs (%zu bytes, vector has %zu)\n", path, size, v.size);
        return -1;
    }
    return 0;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int mode_vectors(const char *directory) {
    DIR *dir = opendir(directory);
    if (dir == NULL) {
        perror(directory);
        return 1;
    }
    char *names[1024];
    size_t count = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL && count < 1024) {
        size_t len = strlen(entry->d_name);
        if (len > 7 && strcmp(entry->d_name + len - 7, ".vector") == 0) {
            names[count] = malloc(strlen(directory) + len + 2);
            if (names[count] == NULL) return 1;
            sprintf(names[count], "%s/%s", directory, entry->d_name);
            count++;
        }
    }
    closedir(dir);
    qsort(names, count, sizeof names[0], compare_names);
    unsigned failures = 0;
    for (size_t i = 0; i < count; i++) {
        if (check_vector(names[i]) != 0) failures++;
        free(names[i]);
    }
    printf("vectors: %zu checked, %u failed\n", count, failures);
    return failures == 0 && count > 0 ? 0 : 1;
}


/* ---- Named ports (Protocols/named-ports.md) ----------------------------------------------- */

#define RLKN_HEADER 8u
#define RLKN_MAX_NAME 100u
#define RLKN_HELLO 1u
#define RLKN_WELCOME 2u
#define RLKN_DENIED 3u
#define RLKN_UNKNOWN_NAME 4u
#define RLKN_TOO_MANY_CONNECTIONS 5u

static int is_name(const uint8_t *name, size_t n) {
    if (n < 1 || n > RLKN_MAX_NAME) return 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = name[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
        if (!ok) return 0;
    }
    return 1;
}

/* Section 3.2: the abstract address (without the leading NUL) of `name` in the scope of `uid`. */
static size_t named_address(const char *name, uint32_t uid, char out[108]) {
    char scope[32];
    int scope_len = snprintf(scope, sizeof scope, "runloopkit/%u/", uid);
    size_t n = strlen(name);
    if ((size_t)scope_len + n <= 107) {
        memcpy(out, scope, (size_t)scope_len);
        memcpy(out + scope_len, name, n);
        return (size_t)scope_len + n;
    }
    uint64_t hash = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) hash = (hash ^ (uint8_t)name[i]) * 0x100000001b3ull;
    return (size_t)snprintf(out, 108, "%s~%016llx", scope, (unsigned long long)hash);
}

/* Section 4.3 H3-H9 for a record read by `owner_side` (HELLO) or the client (answers). Returns
 * NULL and the kind (and the name for HELLO) or the reason. */
static const char *handshake_decode(const uint8_t *r, size_t n, int owner_side, unsigned *kind,
                                    const uint8_t **name, size_t *name_len) {
    if (n < RLKN_HEADER) return "truncated";
    if (memcmp(r, "RLKN", 4) != 0) return "badMagic";
    if (r[4] != 1) return "unsupportedVersion";
    if (owner_side ? r[5] != RLKN_HELLO : (r[5] < RLKN_WELCOME || r[5] > RLKN_TOO_MANY_CONNECTIONS)) return "unexpectedKind";
    if (r[7] != 0) return "reservedBytes";
    if (n != RLKN_HEADER + r[6]) return "lengthMismatch";
    if (r[5] == RLKN_HELLO ? !is_name(r + RLKN_HEADER, r[6]) : r[6] != 0) return "invalidName";
    *kind = r[5];
    *name = r + RLKN_HEADER;
    *name_len = r[6];
    return NULL;
}

static size_t handshake_encode(unsigned kind, const char *name, uint8_t *out) {
    size_t n = kind == RLKN_HELLO ? strlen(name) : 0;
    memcpy(out, "RLKN", 4);
    out[4] = 1;
    out[5] = (uint8_t)kind;
    out[6] = (uint8_t)n;
    out[7] = 0;
    memcpy(out + RLKN_HEADER, name, n);
    return RLKN_HEADER + n;
}

/* Sections 3.4-3.5 and 4.1: connects to `name` in the scope of `uid` and checks the listener's
 * uid. Returns the connected (blocking) socket, or -1 when the name is absent there. */
static int named_connect_scope(const char *name, uint32_t uid) {
    struct sockaddr_un address;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    size_t len = named_address(name, uid, address.sun_path + 1);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct timeval limit = {.tv_sec = WAIT_MS / 1000, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
    if (connect(fd, (struct sockaddr *)&address, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len)) != 0) {
        close(fd);
        return -1;
    }
    struct ucred peer;
    socklen_t peer_len = sizeof peer;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_len) != 0 || peer.uid != uid) {
        fprintf(stderr, "PortPeerC: listener of %s in scope %u is not uid %u: ignored\n", name, uid, uid);
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads the owner's answer (section 4.1.4); returns its kind, 0 at end of stream, -1 on error. */
static int read_answer(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, WAIT_MS) <= 0) {
        fprintf(stderr, "PortPeerC: no answer within %d ms\n", WAIT_MS);
        return -1;
    }
    uint8_t record[RLKN_HEADER + RLKN_MAX_NAME + 1];
    ssize_t n = recv(fd, record, sizeof record, 0);
    if (n < 0) return -1;
    if (n == 0) return 0;
    unsigned kind = 0;
    const uint8_t *name;
    size_t name_len;
    const char *reason = handshake_decode(record, (size_t)n, 0, &kind, &name, &name_len);
    if (reason != NULL) {
        fprintf(stderr, "PortPeerC: malformed answer: %s\n", reason);
        return -1;
    }
    return (int)kind;
}

/* connect <name> <expectedReply>: the client of section 4.1, then mode_request over the
 * connection. */
static int mode_connect(const char *name, const char *expected) {
    if (!is_name((const uint8_t *)name, strlen(name))) {
        fprintf(stderr, "PortPeerC: invalidName\n");
        return 1;
    }
    uint32_t scopes[2] = {(uint32_t)geteuid(), 0};
    for (int i = 0; i < (scopes[0] == 0 ? 1 : 2); i++) {
        int fd = named_connect_scope(name, scopes[i]);
        if (fd < 0) continue;
        uint8_t hello[RLKN_HEADER + RLKN_MAX_NAME];
        size_t size = handshake_encode(RLKN_HELLO, name, hello);
        if (send(fd, hello, size, MSG_NOSIGNAL) != (ssize_t)size) {
            close(fd);
            continue;
        }
        int kind = read_answer(fd);
        if (kind == RLKN_WELCOME) {
            printf("welcome\n");
            fflush(stdout);
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
            return mode_request(fd, expected);
        }
        close(fd);
        if (kind == RLKN_DENIED) {
            printf("denied\n");
            return 1;
        }
        if (kind == RLKN_TOO_MANY_CONNECTIONS) {
            printf("too-many-connections\n");
            return 1;
        }
        if (kind < 0) return 1;
    }
    printf("nameNotFound\n");
    return 1;
}

/* sendmsg(2) of one record with SCM_CREDENTIALS claiming `pid` (and this process's own uid and
 * gid): the kernel refuses (EPERM) a pid other than the caller's without CAP_SYS_ADMIN. */
static ssize_t send_claiming(int fd, const void *bytes, size_t size, pid_t pid) {
    union {
        struct cmsghdr header;
        char bytes[CMSG_SPACE(sizeof(struct ucred))];
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = {.iov_base = (void *)bytes, .iov_len = size};
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
    struct ucred claim = {.pid = pid, .uid = geteuid(), .gid = getegid()};
    memcpy(CMSG_DATA(cmsg), &claim, sizeof claim);
    return sendmsg(fd, &msg, MSG_NOSIGNAL);
}

/* Connects to `name` in this process's scope, else the system's; -1 (after printing
 * "nameNotFound") when neither has it. */
static int named_connect_any(const char *name) {
    int fd = named_connect_scope(name, (uint32_t)geteuid());
    if (fd < 0) fd = named_connect_scope(name, 0);
    if (fd < 0) printf("nameNotFound\n");
    return fd;
}

/* lie <name> [<pid>]: connects and sends HELLO with SCM_CREDENTIALS claiming `pid` (section 5.2:
 * the kernel refuses that to an unprivileged process). Prints what the kernel and the owner said. */
static int mode_lie(const char *name, pid_t pid) {
    int fd = named_connect_any(name);
    if (fd < 0) return 1;
    uint8_t hello[RLKN_HEADER + RLKN_MAX_NAME];
    size_t size = handshake_encode(RLKN_HELLO, name, hello);
    if (send_claiming(fd, hello, size, pid) < 0) {
        printf("lie refused: %s\n", errno == EPERM ? "EPERM" : strerror(errno));
    } else {
        printf("lie sent\n");
    }
    fflush(stdout);
    int kind = read_answer(fd);
    printf("answer: %s\n", kind == RLKN_WELCOME ? "welcome" : kind == RLKN_DENIED ? "denied" : kind == 0 ? "closed" : "error");
    close(fd);
    return 0;
}

/* forge <name> <pid>: a client that completes the handshake honestly, then sends a valid frame
 * whose SCM_CREDENTIALS claim `pid` (as root: the owner's own pid, which only CAP_SYS_ADMIN can
 * claim). Prints what the kernel and the owner did. */
static int mode_forge(const char *name, pid_t pid) {
    int fd = named_connect_any(name);
    if (fd < 0) return 1;
    uint8_t hello[RLKN_HEADER + RLKN_MAX_NAME];
    size_t size = handshake_encode(RLKN_HELLO, name, hello);
    if (send(fd, hello, size, MSG_NOSIGNAL) != (ssize_t)size || read_answer(fd) != RLKN_WELCOME) {
        printf("not welcomed\n");
        close(fd);
        return 1;
    }
    printf("welcome\n");
    struct rlk_message message;
    memset(&message, 0, sizeof message);
    message.msgid = 9;
    message.count = 1;
    message.components[0].kind = RLK_KIND_DATA;
    message.components[0].bytes = (const uint8_t *)"forged";
    message.components[0].length = 6;
    static uint8_t frame[RLK_MAX_FRAME];
    size_t frame_size = rlk_encode(&message, frame);
    if (send_claiming(fd, frame, frame_size, pid) < 0) {
        printf("forgery refused: %s\n", errno == EPERM ? "EPERM" : strerror(errno));
    } else {
        printf("forgery sent\n");
    }
    fflush(stdout);
    /* The owner drops the connection: end of stream (or a reset). */
    struct pollfd p = {.fd = fd, .events = POLLIN, .revents = 0};
    uint8_t byte;
    if (poll(&p, 1, WAIT_MS) > 0 && recv(fd, &byte, 1, 0) <= 0) printf("dropped\n");
    close(fd);
    return 0;
}

/* spawn-with-pid <pid> <path> [<args>...]: clone3(2) with set_tid, so that the child gets a pid
 * of the caller's choosing (to reproduce pid reuse); the child execs <path>. */
static int mode_spawn_with_pid(pid_t pid, char **argv) {
    struct clone_args args;
    memset(&args, 0, sizeof args);
    args.exit_signal = SIGCHLD;
    args.set_tid = (uint64_t)(uintptr_t)&pid;
    args.set_tid_size = 1;
    long child = syscall(SYS_clone3, &args, sizeof args);
    if (child < 0) {
        printf("spawn failed: %s\n", errno == EEXIST ? "EEXIST" : errno == EPERM ? "EPERM" : strerror(errno));
        return 1;
    }
    if (child == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    printf("spawned %ld\n", child);
    fflush(stdout);
    int status = 0;
    while (waitpid((pid_t)child, &status, 0) < 0 && errno == EINTR) {}
    return 0;
}

/* named-vectors <directory>: section 8 of named-ports.md. */
static int check_named_vector(const char *path) {
    FILE *file = fopen(path, "r");
    if (file == NULL) return 1;
    char line[4096], name[256] = "", expect[256] = "", side[16] = "";
    static uint8_t record[4096], address[512];
    long record_len = 0, address_len = 0;
    long uid = -1;
    while (fgets(line, sizeof line, file) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0') continue;
        char *colon = strchr(line, ':');
        if (colon == NULL) continue;
        *colon = '\0';
        char *arg = colon + 1;
        while (*arg == ' ') arg++;
        if (strcmp(line, "name") == 0) {
            snprintf(name, sizeof name, "%s", arg);
        } else if (strcmp(line, "name-repeat") == 0) {
            char c;
            int count;
            if (sscanf(arg, "%c %d", &c, &count) == 2 && count < 255) {
                memset(name, c, (size_t)count);
                name[count] = '\0';
            }
        } else if (strcmp(line, "uid") == 0) {
            uid = strtol(arg, NULL, 10);
        } else if (strcmp(line, "address") == 0) {
            long n = parse_hex(arg, address + address_len, sizeof address - (size_t)address_len);
            if (n < 0) break;
            address_len += n;
        } else if (strcmp(line, "record") == 0) {
            long n = parse_hex(arg, record + record_len, sizeof record - (size_t)record_len);
            if (n < 0) break;
            record_len += n;
        } else if (strcmp(line, "side") == 0) {
            snprintf(side, sizeof side, "%s", arg);
        } else if (strcmp(line, "expect") == 0) {
            snprintf(expect, sizeof expect, "%s", arg);
        }
    }
    fclose(file);
    if (uid >= 0) {
        char derived[108];
        size_t n = named_address(name, (uint32_t)uid, derived);
        int ok = (long)n == address_len && memcmp(derived, address, n) == 0;
        if (!ok) fprintf(stderr, "PortPeerC: %s: derived address %.*s differs\n", path, (int)n, derived);
        return ok ? 0 : 1;
    }
    unsigned kind = 0;
    const uint8_t *hello_name;
    size_t hello_len;
    const char *reason = handshake_decode(record, (size_t)record_len, strcmp(side, "owner") == 0, &kind, &hello_name, &hello_len);
    if (strncmp(expect, "error ", 6) == 0) {
        int ok = reason != NULL && strcmp(reason, expect + 6) == 0;
        if (!ok) fprintf(stderr, "PortPeerC: %s: expected %s, got %s\n", path, expect, reason ? reason : "ok");
        return ok ? 0 : 1;
    }
    if (reason != NULL) {
        fprintf(stderr, "PortPeerC: %s: rejected (%s), expected %s\n", path, reason, expect);
        return 1;
    }
    char expected_name[256] = "";
    unsigned expected_kind = strcmp(expect, "welcome") == 0 ? RLKN_WELCOME
        : strcmp(expect, "denied") == 0 ? RLKN_DENIED
        : strcmp(expect, "unknown-name") == 0 ? RLKN_UNKNOWN_NAME
        : strcmp(expect, "too-many-connections") == 0 ? RLKN_TOO_MANY_CONNECTIONS : RLKN_HELLO;
    if (expected_kind == RLKN_HELLO) snprintf(expected_name, sizeof expected_name, "%s", expect + 6);
    uint8_t encoded[RLKN_HEADER + 256];
    size_t size = handshake_encode(expected_kind, expected_name, encoded);
    int ok = kind == expected_kind && (long)size == record_len && memcmp(encoded, record, size) == 0
        && (kind != RLKN_HELLO || (hello_len == strlen(expected_name) && memcmp(hello_name, expected_name, hello_len) == 0));
    if (!ok) fprintf(stderr, "PortPeerC: %s: decoded or re-encoded differently\n", path);
    return ok ? 0 : 1;
}

static int mode_named_vectors(const char *directory) {
    DIR *dir = opendir(directory);
    if (dir == NULL) {
        perror("PortPeerC: opendir");
        return 1;
    }
    unsigned count = 0, failures = 0;
    struct dirent *entry;
    char path[4096];
    while ((entry = readdir(dir)) != NULL) {
        size_t len = strlen(entry->d_name);
        if (len <= 7 || strcmp(entry->d_name + len - 7, ".vector") != 0) continue;
        snprintf(path, sizeof path, "%s/%s", directory, entry->d_name);
        count++;
        if (check_named_vector(path) != 0) failures++;
    }
    closedir(dir);
    if (failures == 0) printf("named vectors: %u passed\n", count);
    else printf("named vectors: %u of %u failed\n", failures, count);
    return failures == 0 && count > 0 ? 0 : 1;
}

/* ---- main -------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "request") == 0) {
        int fd = parse_fd(argv[2]);
        return fd < 0 ? 2 : mode_request(fd, argv[3]);
    }
    if (argc == 3 && strcmp(argv[1], "serve") == 0) {
        int fd = parse_fd(argv[2]);
        return fd < 0 ? 2 : mode_serve(fd);
    }
    if (argc == 3 && strcmp(argv[1], "vectors") == 0) {
        return mode_vectors(argv[2]);
    }
    if (argc == 4 && strcmp(argv[1], "connect") == 0) return mode_connect(argv[2], argv[3]);
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "lie") == 0) return mode_lie(argv[2], argc == 4 ? atoi(argv[3]) : 1);
    if (argc == 4 && strcmp(argv[1], "forge") == 0) return mode_forge(argv[2], atoi(argv[3]));
    if (argc >= 4 && strcmp(argv[1], "spawn-with-pid") == 0) return mode_spawn_with_pid(atoi(argv[2]), argv + 3);
    if (argc == 3 && strcmp(argv[1], "named-vectors") == 0) return mode_named_vectors(argv[2]);
    if (argc == 4 && strcmp(argv[1], "sealed") == 0) {
        int fd = parse_fd(argv[2]);
        return fd < 0 ? 1 : mode_sealed(fd, strtoull(argv[3], NULL, 10));
    }
    fprintf(stderr,
            "usage: PortPeerC request <sendRightFD> <expectedReplyText>\n"
            "       PortPeerC serve <receiveFD>\n"
            "       PortPeerC vectors <directory>\n"
            "       PortPeerC connect <name> <expectedReplyText>\n"
            "       PortPeerC lie <name> [<pid>]\n"
            "       PortPeerC forge <name> <pid>\n"
            "       PortPeerC spawn-with-pid <pid> <path> [<args>...]\n"
            "       PortPeerC named-vectors <directory>\n"
            "       PortPeerC sealed <sendRightFD> <bytes>\n");
    return 2;
}
