/*
 * mm_wedge: does a process killed inside a UCX shared-memory send stop its
 * receiver from hearing anyone else? (README, Peer failure.)
 *
 * A documented experiment on UCX itself (raw UCP, no ucxp2p), not part of
 * `make check`: run test/ucx/mm_wedge.sh. Three processes share a directory
 * for their worker addresses:
 *   recv DIR           receives good's messages for 7 s, checks their order
 *   good DIR           sends 8-byte messages (tag 1) for 5.5 s, 1 per ms
 *   victim DIR [WHERE] sends tag 2 for 1.5 s, then kills itself:
 *                      WHERE=inside  in the pack callback of a generic
 *                                    datatype send, i.e. after the mm
 *                                    transport reserved a slot in recv's
 *                                    FIFO and before it marked it written
 *                      WHERE=outside between two UCX calls
 * If the receiver's count from `good` stops growing when the victim dies,
 * the victim wedged its FIFO. `good` counts sends completed on its side: an
 * 8-byte send completes once it is in the receiver's FIFO, so a wedged run
 * shows up to a FIFO's worth (UCX_MM_FIFO_SIZE, 64) sent but never received.
 */
#include <ucp/api/ucp.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static ucp_context_h g_ctx;
static ucp_worker_h g_worker;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void die(const char *what, ucs_status_t st) {
    fprintf(stderr, "mm_wedge: %s: %s\n", what, ucs_status_string(st));
    exit(2);
}

/* The generic datatype whose pack kills the process. */
static void *start_pack(void *c, const void *b, size_t n) { (void)b; (void)n; return c; }
static void *start_unpack(void *c, void *b, size_t n) { (void)b; (void)n; return c; }
static size_t packed_size(void *s) { (void)s; return 100; }
static size_t pack_and_die(void *s, size_t off, void *dst, size_t max) {
    (void)s; (void)off; (void)dst; (void)max;
    fprintf(stderr, "victim: killing itself inside the send (pack callback)\n");
    kill(getpid(), SIGKILL);
    return 0;
}
static ucs_status_t unpack(void *s, size_t off, const void *src, size_t n) {
    (void)s; (void)off; (void)src; (void)n;
    return UCS_OK;
}
static void finish(void *s) { (void)s; }

static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t st) {
    (void)arg; (void)ep;
    fprintf(stderr, "endpoint error: %s\n", ucs_status_string(st));
}

static void publish_address(const char *path) {
    ucp_address_t *a;
    size_t len;
    char tmp[600];
    ucs_status_t st = ucp_worker_get_address(g_worker, &a, &len);
    if (st != UCS_OK) die("ucp_worker_get_address", st);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL || fwrite(a, 1, len, f) != len || fclose(f) != 0 || rename(tmp, path) != 0) {
        perror("mm_wedge: writing the address");
        exit(2);
    }
    ucp_worker_release_address(g_worker, a);
}

static ucp_ep_h connect_to(const char *path) {
    static char addr[65536];
    FILE *f;
    double t0 = now_s();
    while ((f = fopen(path, "rb")) == NULL) {
        if (now_s() - t0 > 10) { fprintf(stderr, "mm_wedge: no %s\n", path); exit(2); }
        usleep(10000);
    }
    size_t len = fread(addr, 1, sizeof addr, f);
    fclose(f);
    if (len == 0) { fprintf(stderr, "mm_wedge: empty %s\n", path); exit(2); }
    ucp_ep_params_t p;
    memset(&p, 0, sizeof p);
    p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                   UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p.address = (const ucp_address_t *)addr;
    p.err_mode = UCP_ERR_HANDLING_MODE_PEER;  /* as ucxp2p's endpoints */
    p.err_handler.cb = on_ep_error;
    ucp_ep_h ep;
    ucs_status_t st = ucp_ep_create(g_worker, &p, &ep);
    if (st != UCS_OK) die("ucp_ep_create", st);
    return ep;
}

/* Waits for a send; returns how it ended. */
static ucs_status_t wait_send(void *req) {
    if (req == NULL) return UCS_OK;
    if (UCS_PTR_IS_ERR(req)) return UCS_PTR_STATUS(req);
    while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(g_worker);
    ucs_status_t st = ucp_request_check_status(req);
    ucp_request_free(req);
    return st;
}

static int run_recv(void) {
    unsigned long count = 0, next_seq = 0;
    char buf[256];
    double t0 = now_s(), last = t0;
    while (now_s() - t0 < 7) {
        ucp_request_param_t rp;  /* the payload says all: no tag info needed */
        memset(&rp, 0, sizeof rp);
        /* Only good's tag: the victim's messages stay unexpected. */
        void *req = ucp_tag_recv_nbx(g_worker, buf, sizeof buf, 1, ~(ucp_tag_t)0, &rp);
        if (UCS_PTR_IS_ERR(req)) die("ucp_tag_recv_nbx", UCS_PTR_STATUS(req));
        if (req != NULL) {  /* NULL: completed at once, buf filled */
            while (ucp_request_check_status(req) == UCS_INPROGRESS && now_s() - t0 < 7) {
                ucp_worker_progress(g_worker);
            }
            ucs_status_t st = ucp_request_check_status(req);
            if (st == UCS_INPROGRESS) {
                ucp_request_cancel(g_worker, req);
                while (ucp_request_check_status(req) == UCS_INPROGRESS) {
                    ucp_worker_progress(g_worker);
                }
                ucp_request_free(req);
                break;
            }
            ucp_request_free(req);
            if (st != UCS_OK) die("receive", st);
        }
        unsigned long seq;  /* good's messages carry 0, 1, 2, ... */
        memcpy(&seq, buf, sizeof seq);
        if (seq != next_seq) {
            printf("recv: message %lu where %lu was due\n", seq, next_seq);
        }
        next_seq = seq + 1;
        ++count;
        if (now_s() - last >= 0.5) {
            printf("recv t=%.1f s: %lu from good\n", now_s() - t0, count);
            fflush(stdout);
            last = now_s();
        }
    }
    printf("recv end: %lu from good\n", count);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: mm_wedge recv|good|victim DIR [inside|outside]\n");
        return 2;
    }
    const char *role = argv[1];
    char path[512];
    snprintf(path, sizeof path, "%s/recv", argv[2]);

    ucp_params_t pp;
    memset(&pp, 0, sizeof pp);
    pp.field_mask = UCP_PARAM_FIELD_FEATURES;
    pp.features = UCP_FEATURE_TAG;
    ucs_status_t st = ucp_init(&pp, NULL, &g_ctx);
    if (st != UCS_OK) die("ucp_init", st);
    ucp_worker_params_t wp;
    memset(&wp, 0, sizeof wp);
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    st = ucp_worker_create(g_ctx, &wp, &g_worker);
    if (st != UCS_OK) die("ucp_worker_create", st);

    if (strcmp(role, "recv") == 0) {
        publish_address(path);
        return run_recv();
    }
    ucp_ep_h ep = connect_to(path);
    char msg[8] = {0};
    ucp_request_param_t rp;
    memset(&rp, 0, sizeof rp);
    double t0 = now_s();
    if (strcmp(role, "good") == 0) {
        unsigned long n = 0;
        ucs_status_t sst = UCS_OK;
        while (now_s() - t0 < 5.5 &&
               (sst = wait_send(ucp_tag_send_nbx(ep, &n, sizeof n, 1, &rp))) == UCS_OK) {
            ++n;
            usleep(1000);
        }
        /* A send still waiting when the receiver exits fails. */
        printf("good sent %lu (%s)\n", n, ucs_status_string(sst));
        return 0;
    }
    const int inside = argc < 4 || strcmp(argv[3], "outside") != 0;
    for (unsigned long v = 1000000000ul; now_s() - t0 < 1.5; ++v) {
        st = wait_send(ucp_tag_send_nbx(ep, &v, sizeof v, 2, &rp));
        if (st != UCS_OK) die("victim's send", st);
        usleep(1000);
    }
    if (!inside) {
        fprintf(stderr, "victim: killing itself between two UCX calls\n");
        kill(getpid(), SIGKILL);
    }
    static const ucp_generic_dt_ops_t ops = {start_pack, start_unpack, packed_size,
                                            pack_and_die, unpack, finish};
    ucp_datatype_t dt;
    st = ucp_dt_create_generic(&ops, NULL, &dt);
    if (st != UCS_OK) die("ucp_dt_create_generic", st);
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
    rp.datatype = dt;
    wait_send(ucp_tag_send_nbx(ep, msg, 1, 2, &rp));
    fprintf(stderr, "mm_wedge: the victim outlived its pack callback\n");
    return 1;
}
