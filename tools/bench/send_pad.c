/*
 * How each side's own instructions per message cost message rate: an
 * LD_PRELOAD library that runs about SEND_PAD extra instructions (plain
 * integer work, four independent chains, no memory traffic) before every
 * ucp_tag_send_nbx of the process it is loaded into, and RECV_PAD before
 * every ucp_tag_recv_nbx and ucp_tag_msg_recv_nbx (one of the two per
 * message received). E.g. ucx_perftest's tag_bw client, or either rank of
 * p2p_perftest (docs/PERFORMANCE.md, 2026-11-29 15:00). Not built by
 * configure:
 *
 *   cc -O2 -shared -fPIC -o /tmp/send_pad.so tools/bench/send_pad.c -ldl
 *   SEND_PAD=300 LD_PRELOAD=/tmp/send_pad.so ucx_perftest HOST -t tag_bw ...
 *
 * Unset or 0 adds only the wrapper's call (a few instructions).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <ucp/api/ucp.h>

typedef ucs_status_ptr_t (*send_fn)(ucp_ep_h, const void *, size_t, ucp_tag_t,
                                    const ucp_request_param_t *);
typedef ucs_status_ptr_t (*recv_fn)(ucp_worker_h, void *, size_t, ucp_tag_t, ucp_tag_t,
                                    const ucp_request_param_t *);
typedef ucs_status_ptr_t (*msg_recv_fn)(ucp_worker_h, void *, size_t, ucp_tag_message_h,
                                        const ucp_request_param_t *);

volatile unsigned long send_pad_sink;

/** The real function of name (aborts when absent) and the rounds of 7
 *  instructions for about the instructions var asks; once per wrapper. */
static void *find(const char *name, const char *var, long *rounds) {
    const char *e = getenv(var);
    *rounds = e != NULL ? atol(e) / 7 : 0;
    void *f = dlsym(RTLD_NEXT, name);
    if (f == NULL) {
        fprintf(stderr, "send_pad: no %s to wrap\n", name);
        abort();
    }
    return f;
}

static inline void pad(long rounds) {
    unsigned long a = send_pad_sink, b = a + 1, c = a + 2, d = a + 3;
    for (long i = 0; i < rounds; ++i) {
        a += i;
        b ^= i;
        c += b;
        d ^= a;
        __asm__ volatile("" : "+r"(a), "+r"(b), "+r"(c), "+r"(d));
    }
    send_pad_sink = a + b + c + d;
}

ucs_status_ptr_t ucp_tag_send_nbx(ucp_ep_h ep, const void *buffer, size_t count,
                                  ucp_tag_t tag, const ucp_request_param_t *param) {
    static send_fn real;
    static long rounds;
    if (real == NULL) real = (send_fn)find("ucp_tag_send_nbx", "SEND_PAD", &rounds);
    pad(rounds);
    return real(ep, buffer, count, tag, param);
}

ucs_status_ptr_t ucp_tag_recv_nbx(ucp_worker_h worker, void *buffer, size_t count,
                                  ucp_tag_t tag, ucp_tag_t tag_mask,
                                  const ucp_request_param_t *param) {
    static recv_fn real;
    static long rounds;
    if (real == NULL) real = (recv_fn)find("ucp_tag_recv_nbx", "RECV_PAD", &rounds);
    pad(rounds);
    return real(worker, buffer, count, tag, tag_mask, param);
}

ucs_status_ptr_t ucp_tag_msg_recv_nbx(ucp_worker_h worker, void *buffer, size_t count,
                                      ucp_tag_message_h message,
                                      const ucp_request_param_t *param) {
    static msg_recv_fn real;
    static long rounds;
    if (real == NULL) real = (msg_recv_fn)find("ucp_tag_msg_recv_nbx", "RECV_PAD", &rounds);
    pad(rounds);
    return real(worker, buffer, count, message, param);
}
