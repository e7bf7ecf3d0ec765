/*
 * Loopback TCP bandwidth with the payload received straight into the
 * destination buffer (what a library-owned tcp path would do), over one or
 * more connections ("lanes") driven by one thread per process, each message
 * split evenly between the lanes (as UCX splits a rendezvous between its
 * bandwidth lanes). Built by hand: cc -O2 -o /tmp/tcp_micro tools/bench/tcp_micro.c
 *   tcp_micro s SIZE COUNT PORT LANES   (receiver: prints MiB/s)
 *   tcp_micro c SIZE COUNT PORT LANES   (sender)
 * The first tenth of the messages is warm-up.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_LANES 8

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s s|c SIZE COUNT PORT LANES\n", argv[0]);
        return 2;
    }
    const int recv_side = strcmp(argv[1], "s") == 0;
    const size_t size = strtoull(argv[2], NULL, 0);
    const long count = atol(argv[3]);
    const int port = atoi(argv[4]);
    const int lanes = atoi(argv[5]);
    if (size == 0 || count < 10 || lanes < 1 || lanes > MAX_LANES) {
        fprintf(stderr, "tcp_micro: bad arguments\n");
        return 2;
    }
    char *buf = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
    memset(buf, 1, size);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fds[MAX_LANES], one = 1;
    if (recv_side) {
        int l = socket(AF_INET, SOCK_STREAM, 0);
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, lanes) != 0) die("listen");
        for (int i = 0; i < lanes; ++i) {
            if ((fds[i] = accept(l, NULL, NULL)) < 0) die("accept");
        }
        close(l);
    } else {
        for (int i = 0; i < lanes; ++i) {
            for (int tries = 0;; ++tries) {  /* the receiver may start late: 10 s */
                fds[i] = socket(AF_INET, SOCK_STREAM, 0);
                if (connect(fds[i], (struct sockaddr *)&a, sizeof(a)) == 0) break;
                close(fds[i]);
                if (tries == 1000) die("connect");
                usleep(10000);
            }
        }
    }
    for (int i = 0; i < lanes; ++i) {
        setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    /* Each lane moves its part of every message in turn: lane i's part of
     * message m is [i * part, (i + 1) * part) (the last lane takes the rest). */
    const size_t part = size / lanes;
    long msg[MAX_LANES];
    size_t done[MAX_LANES];
    memset(msg, 0, sizeof(msg));
    memset(done, 0, sizeof(done));
    const long warm = count / 10;
    double t0 = 0;
    int active = lanes;
    while (active > 0) {
        struct pollfd p[MAX_LANES];
        for (int i = 0; i < lanes; ++i) {
            p[i].fd = msg[i] < count ? fds[i] : -1;
            p[i].events = recv_side ? POLLIN : POLLOUT;
        }
        if (poll(p, lanes, -1) < 0) die("poll");
        for (int i = 0; i < lanes; ++i) {
            if (msg[i] >= count || p[i].revents == 0) continue;
            const size_t off = i * part;
            const size_t len = i == lanes - 1 ? size - off : part;
            ssize_t r = recv_side
                ? recv(fds[i], buf + off + done[i], len - done[i], MSG_DONTWAIT)
                : send(fds[i], buf + off + done[i], len - done[i], MSG_DONTWAIT);
            if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (r <= 0) die(recv_side ? "recv" : "send");
            done[i] += (size_t)r;
            if (done[i] == len) {
                done[i] = 0;
                if (++msg[i] == warm && i == 0) t0 = now();
                if (msg[i] == count) --active;
            }
        }
    }
    char ack = 0;
    if (recv_side) {
        double t = now() - t0;
        for (int i = 0; i < lanes; ++i) {
            if (send(fds[i], &ack, 1, 0) != 1) die("ack");
        }
        printf("%.1f\n", (double)size * (count - warm) / t / 1048576.0);
    } else {
        for (int i = 0; i < lanes; ++i) {
            if (recv(fds[i], &ack, 1, MSG_WAITALL) != 1) die("ack");
        }
    }
    return 0;
}
