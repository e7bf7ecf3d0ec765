/*
 * mp_rank scenarios about operations that cannot finish normally:
 *   killee <victim> [rounds] [die_round]  the victim kill -9s itself while
 *       every rank exchanges with every rank; survivors must see each op
 *       naming the victim complete exactly once (OK if it finished first,
 *       else P2P_ERR_PEER_FAILURE) within a bound, then finish a verified
 *       exchange among themselves and print "survivor ok".
 *   shutdown  receives that never match and rendezvous sends nobody
 *       receives are canceled by p2p_comm_shutdown; later posts fail.
 *   dead-arrived  (2 ranks) rank 1 sends, then dies; rank 0, once it knows,
 *       still receives what arrived (one receive per message: a batch
 *       naming one message twice gets it once and P2P_ERR_PEER_FAILURE
 *       once), and a receive of what never came fails at the post.
 *   leave [destroy|shutdown|shutdown-sending]  (2 ranks) rank 1 sends one
 *       message, then destroys (or shuts down) its communicator and lives
 *       on; rank 0's receives nothing will match and its rendezvous send
 *       nobody receives complete with P2P_ERR_PEER_FAILURE, the message
 *       that came is still received, and new posts naming rank 1 fail.
 *       shutdown-sending: rank 1 also leaves a 128 KiB send rank 0 never
 *       receives in flight (its endpoint is closed by force: the goodbye
 *       must still reach rank 0). shutdown-pulled: as shutdown-sending,
 *       but rank 0 receives that message once the goodbye came (it
 *       arrived first), racing rank 1's forced close: the send still ends
 *       P2P_ERR_CANCELED (or OK), the receive once, OK or
 *       P2P_ERR_PEER_FAILURE. silent-destroy, silent-shutdown, silent-late,
 *       silent-gone: rank 1 never names rank 0 (see run_leave).
 *   leave-oom  (2 ranks) as leave, with every C++ allocation failing on
 *       rank 0 while rank 1's goodbye is handled: its 300 pending receives
 *       still complete with P2P_ERR_PEER_FAILURE, and nothing aborts.
 */
#include "../fail_new.h"
#include "mp_common.h"
#include "mp_scenarios.h"

#include <cstring>
#include <cstdlib>
#include <memory>
#include <thread>
#include <unistd.h>

namespace mp {

namespace {

// Read by the completion check of the current killee round.
uint32_t g_victim = 0;
bool g_victim_dead_for_sure = false; // round after the victim's last one
size_t g_failures = 0;

void killee_check(const Xfer &x, const p2p_completion_t &c) {
    if (x.peer != g_victim) {
        check_ok(x, c);
        return;
    }
    if (c.status == P2P_ERR_PEER_FAILURE) {
        ++g_failures;
        return;
    }
    // An eager send may finish locally even after the victim died; nothing
    // can be received from a process that died before sending.
    MP_CHECK(x.is_send || !g_victim_dead_for_sure,
             "%s from the victim %u (tensor %u) posted after its death "
             "completed with %d (%s), expected P2P_ERR_PEER_FAILURE",
             x.is_send ? "send" : "recv", x.peer, x.tid,
             static_cast<int>(c.status), p2p_status_string(c.status));
    MP_CHECK(c.status == P2P_OK && c.bytes == x.len,
             "%s with the victim %u (tensor %u): status %d (%s) bytes %llu; "
             "expected P2P_ERR_PEER_FAILURE, or OK with %zu bytes",
             x.is_send ? "send" : "recv", x.peer, x.tid,
             static_cast<int>(c.status), p2p_status_string(c.status),
             static_cast<unsigned long long>(c.bytes), x.len);
}

} // namespace

void run_killee(int argc, char **argv) {
    serialize_victim(argc > 0 ? std::strtoul(argv[0], nullptr, 10)
                              : env_ul("WORLD_SIZE", 1) - 1);
    Rank r;
    set_identity(static_cast<int>(r.rank()), "killee");
    MP_CHECK(r.size() >= 3, "killee needs at least 3 ranks (2 survivors)");
    g_victim = argc > 0 ? static_cast<uint32_t>(std::strtoul(argv[0], nullptr, 10))
                        : r.size() - 1;
    const size_t rounds = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 6;
    const size_t die_round = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 2;
    MP_CHECK(g_victim < r.size() && die_round < rounds, "bad arguments");
    const double bound_s = 5.0 * env_ul("P2P_PEER_TIMEOUT_MS", 3000) / 1000.0 + 5;
    const bool victim = r.rank() == g_victim;
    const size_t kSizes[2] = {100, (size_t(1) << 20) + 3};
    std::vector<uint32_t> survivors;
    for (uint32_t p = 0; p < r.size(); ++p) {
        if (p != g_victim) {
            survivors.push_back(p);
        }
    }
    size_t rejected = 0;
    double worst_round_s = 0;
    r.barrier();
    for (size_t round = 0; round < rounds; ++round) {
        g_victim_dead_for_sure = round > die_round;
        const size_t slot = kSizes[0] + kSizes[1];
        RegBuf sbuf(r.ctx(), slot * r.size(), 0);
        RegBuf rbuf(r.ctx(), slot * r.size(), 0xEE);
        std::vector<Xfer> ops;
        for (uint32_t p = 0; p < r.size(); ++p) {
            if (p == r.rank()) {
                continue;
            }
            for (size_t k = 0; k < 2; ++k) {
                uint32_t tid = static_cast<uint32_t>(round * 10 + k);
                size_t off = p * slot + (k == 0 ? 0 : kSizes[0]);
                fill_pattern(sbuf.data() + off, kSizes[k], r.rank(), p, tid);
                for (bool send : {false, true}) {
                    Xfer x{send, p, tid, kSizes[k], off};
                    p2p_status_t st =
                        send ? p2p_comm_send(r.comm(), p, tid, sbuf.data() + off,
                                             x.len, sbuf.mem(), ctx_of(ops.size()))
                             : p2p_comm_recv(r.comm(), p, tid, rbuf.data() + off,
                                             x.len, rbuf.mem(), ctx_of(ops.size()));
                    if (st == P2P_ERR_PEER_FAILURE && p == g_victim &&
                        round >= die_round) {
                        ++rejected; // "peer already known dead"
                        continue;
                    }
                    MP_CHECK(st == P2P_OK, "post %s peer %u tensor %u round "
                             "%zu: %d (%s)", send ? "send" : "recv", p, tid,
                             round, static_cast<int>(st), p2p_status_string(st));
                    ops.push_back(x);
                }
            }
        }
        if (victim && round == die_round) {
            say("victim posted round %zu, dying now", round);
            die_now(r.comm(), 20);
        }
        auto t0 = Clock::now();
        collect(r.comm(), ops, bound_s, killee_check);
        worst_round_s = std::max(worst_round_s, seconds_since(t0));
        expect_quiet(r.comm());
        for (const Xfer &x : ops) {
            if (!x.is_send && x.peer != g_victim) {
                check_pattern(rbuf.data() + x.off, x.len, x.peer, r.rank(), x.tid,
                              "killee recv");
            }
        }
        sbuf.release();
        rbuf.release();
    }
    MP_CHECK(g_failures + rejected > 0,
             "the victim died but no operation reported P2P_ERR_PEER_FAILURE");
    // The survivors still talk to each other (no bootstrap barrier: the
    // bootstrap includes the dead rank).
    ExchangeOptions opt;
    opt.deadline_s = 60;
    exchange(r, survivors, {1, 65536, (1 << 20) + 3}, 90000, opt);
    say("survivor ok rank=%u: %zu peer failures completed, %zu rejected at "
        "post, slowest round %.2f s (bound %.0f s)",
        r.rank(), g_failures, rejected, worst_round_s, bound_s);
    r.finish();
}

// ------------------------------------------------------------------ shutdown

namespace {

uint32_t g_self = 0;  // this rank, for shutdown_check

void shutdown_check(const Xfer &x, const p2p_completion_t &c) {
    if (x.is_send && c.status == P2P_OK) {
        MP_CHECK(c.bytes == x.len, "send finished with %llu of %zu bytes",
                 static_cast<unsigned long long>(c.bytes), x.len);
        return; // an eager send may finish before the shutdown
    }
    if (x.peer != g_self && c.status == P2P_ERR_PEER_FAILURE) {
        return;  // that peer shut down first: its goodbye came before ours
    }
    MP_CHECK(c.status == P2P_ERR_CANCELED,
             "%s peer %u tensor %u (%zu B) that nobody matched completed "
             "with %d (%s), expected P2P_ERR_CANCELED",
             x.is_send ? "send" : "recv", x.peer, x.tid, x.len,
             static_cast<int>(c.status), p2p_status_string(c.status));
}

} // namespace

void run_shutdown(int, char **) {
    Rank r;
    set_identity(static_cast<int>(r.rank()), "shutdown");
    const size_t kBig = size_t(4) << 20, kSmall = 100;
    const size_t slot = 2 * (kBig + kSmall);
    RegBuf buf(r.ctx(), slot * r.size(), 0);
    std::vector<Xfer> ops;
    size_t nrecv = 0;
    for (uint32_t p = 0; p < r.size(); ++p) {
        size_t off = p * slot;
        // Tensor ids nobody uses on the other side.
        const Xfer mine[] = {{false, p, 0xDEAD00, kSmall, off},
                             {false, p, 0xDEAD01, kBig, off + kSmall},
                             {true, p, 0xBEEF00 + r.rank(), kBig,
                              off + kSmall + kBig},
                             {true, p, 0xBEEF80 + r.rank(), kSmall,
                              off + kSmall + 2 * kBig}};
        for (const Xfer &x : mine) {
            if (x.is_send) {
                MP_OK(p2p_comm_send(r.comm(), x.peer, x.tid, buf.data() + x.off,
                                    x.len, buf.mem(), ctx_of(ops.size())));
            } else {
                MP_OK(p2p_comm_recv(r.comm(), x.peer, x.tid, buf.data() + x.off,
                                    x.len, buf.mem(), ctx_of(ops.size())));
                ++nrecv;
            }
            ops.push_back(x);
        }
    }
    r.barrier(); // every rank posted: unmatched messages have arrived
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    size_t pend = 0;
    MP_OK(p2p_comm_pending(r.comm(), P2P_QUEUE_RECV, &pend));
    MP_CHECK(pend == nrecv, "%zu receives that cannot match, pending says %zu",
             nrecv, pend);
    MP_CHECK(pop(r.comm(), P2P_QUEUE_RECV, 0).empty(),
             "a receive completed although nothing can match it");
    MP_EXPECT_STATUS(P2P_ERR_BUSY, p2p_mem_deregister(buf.mem()));
    r.barrier();  // every rank checked before any says goodbye

    g_self = r.rank();
    auto t0 = Clock::now();
    MP_OK(p2p_comm_shutdown(r.comm()));
    collect(r.comm(), ops, 10, shutdown_check);
    const double took = seconds_since(t0);
    expect_quiet(r.comm());

    // Later posts fail and queue nothing.
    p2p_block_t blk{r.rank(), 1, buf.data(), 8, buf.mem(), nullptr};
    size_t bad = 777;
    MP_EXPECT_STATUS(P2P_ERR_SHUTDOWN,
                     p2p_comm_send(r.comm(), 0, 1, buf.data(), 8, buf.mem(), nullptr));
    MP_EXPECT_STATUS(P2P_ERR_SHUTDOWN,
                     p2p_comm_recv(r.comm(), 0, 1, buf.data(), 8, buf.mem(), nullptr));
    MP_EXPECT_STATUS(P2P_ERR_SHUTDOWN, p2p_comm_send_batch(r.comm(), &blk, 1, &bad));
    MP_EXPECT_STATUS(P2P_ERR_SHUTDOWN, p2p_comm_recv_batch(r.comm(), &blk, 1, &bad));
    MP_CHECK(bad == 777, "a shut-down batch named block %zu as bad", bad);
    MP_OK(p2p_comm_shutdown(r.comm())); // idempotent
    expect_quiet(r.comm());
    size_t n = 99;
    p2p_completion_t e[4];
    auto tw = Clock::now();
    // Nothing can arrive any more: even an endless wait returns at once.
    MP_EXPECT_STATUS(P2P_ERR_SHUTDOWN,
                     p2p_comm_wait(r.comm(), P2P_QUEUE_RECV, e, 4, &n, -1));
    MP_CHECK(n == 0 && seconds_since(tw) < 5, "wait after shutdown: count %zu, "
             "%.2f s", n, seconds_since(tw));
    p2p_comm_info_t info;
    MP_OK(p2p_comm_query(r.comm(), &info));
    buf.release(); // nothing in flight any more
    r.barrier();
    say("shutdown ok: %zu ops canceled in %.3f s", ops.size(), took);
    r.finish();
}

// ------------------------------------------------------------------ dead-arrived

void run_dead_arrived(int, char **) {
    serialize_victim(1);
    Rank r;
    set_identity(static_cast<int>(r.rank()), "dead-arrived");
    MP_CHECK(r.size() == 2, "dead-arrived runs on 2 ranks");
    const size_t kLen = 64;
    const uint32_t kOnce = 7, kTwice = 8, kNever = 9, kProbe = 99;
    RegBuf buf(r.ctx(), 16 * kLen, 0xEE);
    if (r.rank() == 1) {
        for (uint32_t tid : {kOnce, kTwice}) {
            fill_pattern(buf.data() + tid * kLen, kLen, 1, 0, tid);
            MP_OK(p2p_comm_send(r.comm(), 0, tid, buf.data() + tid * kLen, kLen,
                                buf.mem(), nullptr));
        }
        size_t done = 0;
        while (done < 2) {
            for (const p2p_completion_t &c : pop(r.comm(), P2P_QUEUE_SEND, 1000)) {
                MP_CHECK(c.status == P2P_OK, "send completed with %d", c.status);
                ++done;
            }
        }
        r.barrier();  // both messages are on their way
        say("dying now");
        die_now(r.comm(), 200);
    }
    r.barrier();
    // Learn of the death: a receive of something never sent fails.
    const double bound_s = 5.0 * env_ul("P2P_PEER_TIMEOUT_MS", 3000) / 1000.0 + 5;
    MP_OK(p2p_comm_recv(r.comm(), 1, kProbe, buf.data(), kLen, buf.mem(), nullptr));
    std::vector<p2p_completion_t> got;
    auto t0 = Clock::now();
    while (got.empty() && seconds_since(t0) < bound_s) {
        got = pop(r.comm(), P2P_QUEUE_RECV, 500);
    }
    MP_CHECK(got.size() == 1 && got[0].status == P2P_ERR_PEER_FAILURE,
             "the receive from the dead rank gave %zu completions (status %d)",
             got.size(), got.empty() ? 0 : static_cast<int>(got[0].status));
    // One message, two blocks naming it: one gets it, the other fails.
    p2p_block_t b[2];
    for (size_t i = 0; i < 2; ++i) {
        b[i] = {1, kTwice, buf.data() + (2 + i) * kLen, kLen, buf.mem(), ctx_of(i)};
    }
    size_t bad = 77;
    MP_OK(p2p_comm_recv_batch(r.comm(), b, 2, &bad));
    std::vector<p2p_completion_t> two;
    t0 = Clock::now();
    while (two.size() < 2 && seconds_since(t0) < bound_s) {
        for (const p2p_completion_t &c : pop(r.comm(), P2P_QUEUE_RECV, 500)) two.push_back(c);
    }
    MP_CHECK(two.size() == 2, "a batch of 2 receives got %zu completions in %.0f s",
             two.size(), bound_s);
    size_t ok = 0, failed = 0;
    for (const p2p_completion_t &c : two) {
        if (c.status == P2P_OK) {
            ++ok;
            MP_CHECK(c.bytes == kLen, "received %llu bytes",
                     static_cast<unsigned long long>(c.bytes));
            check_pattern(buf.data() + (2 + index_of(c.user_context)) * kLen, kLen, 1, 0,
                          kTwice, "dead-arrived batch");
        } else {
            failed += c.status == P2P_ERR_PEER_FAILURE;
        }
    }
    MP_CHECK(ok == 1 && failed == 1, "batch: %zu OK and %zu P2P_ERR_PEER_FAILURE, "
             "expected one of each", ok, failed);
    // A single receive of what arrived, and of what never came.
    MP_OK(p2p_comm_recv(r.comm(), 1, kOnce, buf.data() + 4 * kLen, kLen, buf.mem(), nullptr));
    got = pop(r.comm(), P2P_QUEUE_RECV, 10000);
    MP_CHECK(got.size() == 1 && got[0].status == P2P_OK,
             "the receive of an arrived message gave %zu completions (status %d)",
             got.size(), got.empty() ? 0 : static_cast<int>(got[0].status));
    check_pattern(buf.data() + 4 * kLen, kLen, 1, 0, kOnce, "dead-arrived single");
    MP_EXPECT_STATUS(P2P_ERR_PEER_FAILURE,
                     p2p_comm_recv(r.comm(), 1, kNever, buf.data(), kLen, buf.mem(), nullptr));
    expect_quiet(r.comm());
    say("dead-arrived ok");
    buf.release();
    r.finish();
}

// ------------------------------------------------------------------ leave

void run_leave(int argc, char **argv) {
    const std::string how = argc == 0 ? "destroy" : argv[0];
    const bool destroy = how == "destroy";
    // shutdown-sending: rank 1 leaves with a send UCX still moves (a
    // rendezvous rank 0 never receives), so its shutdown closes that
    // endpoint by force; rank 0 must still hear the goodbye.
    const bool pulled = how == "shutdown-pulled";
    const bool sending = how == "shutdown-sending" || pulled;
    // silent-*: rank 1 never names rank 0, so it holds no endpoint to it;
    // rank 0's hello (on connecting) is what makes rank 1 say goodbye.
    // silent-destroy / silent-shutdown: rank 0 posts first, then rank 1
    // leaves; silent-late: rank 1 shuts down first, then rank 0 posts (its
    // hello reaches a communicator that said its goodbyes already);
    // silent-gone: as late, but rank 1 destroys its communicator (its
    // context answers the hello).
    const bool gone = how == "silent-gone";
    const bool late = how == "silent-late" || gone;
    const bool silent = late || how == "silent-destroy" || how == "silent-shutdown";
    Rank r;
    set_identity(static_cast<int>(r.rank()), "leave");
    MP_CHECK(r.size() == 2, "leave runs on 2 ranks");
    const size_t kSmall = 64, kMid = size_t(128) << 10, kBig = size_t(4) << 20;
    const uint32_t kSent = 5, kNeverSmall = 100, kNeverBig = 101, kUnreceived = 200,
                   kLeaverUnreceived = 300;
    RegBuf buf(r.ctx(), 4 * kBig, 0xEE);
    if (r.rank() == 1) {
        if (late) {
            say("leaving (%s) before rank 0 posts", how.c_str());
            if (gone) {
                r.destroy_comm();
            } else {
                MP_OK(p2p_comm_shutdown(r.comm()));
            }
            r.barrier();  // rank 0 posts now; our progress thread answers
            r.barrier();  // rank 0 checked
            buf.release();
            r.finish();
            say("leave ok");
            return;
        }
        if (!silent) {
            fill_pattern(buf.data(), kSmall, 1, 0, kSent);
            MP_OK(p2p_comm_send(r.comm(), 0, kSent, buf.data(), kSmall, buf.mem(), nullptr));
            MP_CHECK(pop(r.comm(), P2P_QUEUE_SEND, 10000).size() == 1, "send of %u", kSent);
        }
        if (sending) {
            fill_pattern(buf.data() + kBig, kMid, 1, 0, kLeaverUnreceived);
            MP_OK(p2p_comm_send(r.comm(), 0, kLeaverUnreceived, buf.data() + kBig, kMid,
                                buf.mem(), nullptr));
        }
        r.barrier();  // rank 0 posted what will never match
        if (silent) {
            // Rank 0's hello went out with its first post; give a tcp
            // endpoint's wireup time to deliver it (one reaching the
            // communicator after destroy is the context's: silent-gone).
            const auto t0 = Clock::now();
            while (seconds_since(t0) < 1.0) {
                MP_CHECK(pop(r.comm(), P2P_QUEUE_RECV, 10).empty(), "rank 1 posted nothing");
            }
        }
        say("leaving (%s)", how.c_str());
        if (destroy || how == "silent-destroy") {
            r.destroy_comm();
        } else {
            MP_OK(p2p_comm_shutdown(r.comm()));
        }
        if (sending) {
            std::vector<p2p_completion_t> c = pop(r.comm(), P2P_QUEUE_SEND, 10000);
            // Pulled: the receiver may have taken it all before the close.
            MP_CHECK(c.size() == 1 && (c[0].status == P2P_ERR_CANCELED ||
                                       (pulled && c[0].status == P2P_OK)),
                     "the send %s: %zu completions (status %d %s), expected "
                     "P2P_ERR_CANCELED", pulled ? "rank 0 began to receive" :
                     "nobody received", c.size(),
                     c.empty() ? 0 : static_cast<int>(c[0].status),
                     c.empty() ? "" : p2p_status_string(c[0].status));
        }
        r.barrier();  // rank 0 checked
        buf.release();
        r.finish();
        say("leave ok");
        return;
    }
    std::vector<Xfer> ops = {{false, 1, kNeverSmall, kSmall, kBig},
                             {false, 1, kNeverBig, kBig, 2 * kBig},
                             {true, 1, kUnreceived, kBig, 3 * kBig}};
    auto post_all = [&] {
        std::vector<Xfer> posted;
        for (size_t i = 0; i < ops.size(); ++i) {
            const Xfer &x = ops[i];
            uint8_t *at = buf.data() + x.off;
            p2p_status_t st =
                x.is_send ? p2p_comm_send(r.comm(), x.peer, x.tid, at, x.len, buf.mem(),
                                          ctx_of(posted.size()))
                          : p2p_comm_recv(r.comm(), x.peer, x.tid, at, x.len, buf.mem(),
                                          ctx_of(posted.size()));
            // Late: the goodbye may come back between two posts.
            if (late && st == P2P_ERR_PEER_FAILURE) continue;
            MP_OK(st);
            posted.push_back(x);
        }
        return posted;
    };
    if (!late) ops = post_all();
    r.barrier();
    if (late) ops = post_all();
    auto t0 = Clock::now();
    collect(r.comm(), ops, 20, [](const Xfer &x, const p2p_completion_t &c) {
        MP_CHECK(c.status == P2P_ERR_PEER_FAILURE,
                 "%s of tensor %u naming the rank that left: status %d (%s), "
                 "expected P2P_ERR_PEER_FAILURE", x.is_send ? "send" : "recv",
                 x.tid, static_cast<int>(c.status), p2p_status_string(c.status));
    });
    say("pending operations failed %.3f s after the peer left", seconds_since(t0));
    std::vector<p2p_completion_t> got;
    if (!silent) {
        // What arrived before it left is still received; what never came fails.
        MP_OK(p2p_comm_recv(r.comm(), 1, kSent, buf.data(), kSmall, buf.mem(), nullptr));
        got = pop(r.comm(), P2P_QUEUE_RECV, 10000);
        MP_CHECK(got.size() == 1 && got[0].status == P2P_OK && got[0].bytes == kSmall,
                 "the receive of what arrived gave %zu completions (status %d)",
                 got.size(), got.empty() ? 0 : static_cast<int>(got[0].status));
        check_pattern(buf.data(), kSmall, 1, 0, kSent, "leave");
    }
    MP_EXPECT_STATUS(P2P_ERR_PEER_FAILURE,
                     p2p_comm_recv(r.comm(), 1, 7, buf.data(), kSmall, buf.mem(), nullptr));
    MP_EXPECT_STATUS(P2P_ERR_PEER_FAILURE,
                     p2p_comm_send(r.comm(), 1, 7, buf.data(), kSmall, buf.mem(), nullptr));
    // A batch naming it fails whole, at its block: the block before it
    // (to ourselves) is not posted either.
    for (const bool is_send : {true, false}) {
        const p2p_block_t blocks[2] = {{0, 8, buf.data(), kSmall, buf.mem(), nullptr},
                                       {1, 8, buf.data() + kSmall, kSmall, buf.mem(), nullptr}};
        size_t bad = 99;
        MP_EXPECT_STATUS(P2P_ERR_PEER_FAILURE,
                         is_send ? p2p_comm_send_batch(r.comm(), blocks, 2, &bad)
                                 : p2p_comm_recv_batch(r.comm(), blocks, 2, &bad));
        size_t pend = 99;
        MP_OK(p2p_comm_pending(r.comm(), is_send ? P2P_QUEUE_SEND : P2P_QUEUE_RECV, &pend));
        MP_CHECK(bad == 1 && pend == 0, "a %s batch naming the rank that left: bad index "
                 "%zu (expected 1), %zu left pending (expected 0)",
                 is_send ? "send" : "recv", bad, pend);
    }
    if (pulled) {
        // Its RTS came before the goodbye (one endpoint, in order): the
        // post is accepted, and the receive ends once either way.
        MP_OK(p2p_comm_recv(r.comm(), 1, kLeaverUnreceived, buf.data(), kMid, buf.mem(),
                            nullptr));
        got = pop(r.comm(), P2P_QUEUE_RECV, 10000);
        MP_CHECK(got.size() == 1 && (got[0].status == P2P_ERR_PEER_FAILURE ||
                                     (got[0].status == P2P_OK && got[0].bytes == kMid)),
                 "the receive of the leaver's last send: %zu completions (status %d "
                 "bytes %llu)", got.size(), got.empty() ? 0 : static_cast<int>(got[0].status),
                 got.empty() ? 0ULL : static_cast<unsigned long long>(got[0].bytes));
        if (got[0].status == P2P_OK) {
            check_pattern(buf.data(), kMid, 1, 0, kLeaverUnreceived, "leave");
        }
        say("pulled receive: %s", p2p_status_string(got[0].status));
    }
    expect_quiet(r.comm());
    r.barrier();
    buf.release();
    r.finish();
    say("leave ok");
}

// ------------------------------------------------------------------ leave-oom

void run_leave_oom(int, char **) {
    Rank r;
    set_identity(static_cast<int>(r.rank()), "leave-oom");
    MP_CHECK(r.size() == 2, "leave-oom runs on 2 ranks");
    // More completions than one completion-queue segment holds (128): the
    // queue grows while allocations fail (into what the posts reserved).
    constexpr size_t kOps = 300, kLen = 64;
    RegBuf buf(r.ctx(), kOps * kLen, 0);
    if (r.rank() == 1) {
        // An endpoint to rank 0, so that the goodbye goes there.
        MP_OK(p2p_comm_send(r.comm(), 0, 1, buf.data(), kLen, buf.mem(), nullptr));
        MP_CHECK(pop(r.comm(), P2P_QUEUE_SEND, 10000).size() == 1, "send");
        r.barrier();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        r.destroy_comm();
        r.barrier();
        buf.release();
        r.finish();
        say("leave-oom ok");
        return;
    }
    for (size_t i = 0; i < kOps; ++i) {
        MP_OK(p2p_comm_recv(r.comm(), 1, 100 + static_cast<uint32_t>(i),
                            buf.data() + i * kLen, kLen, buf.mem(), ctx_of(i)));
    }
    // Nothing below allocates until failing is off again: a stack array,
    // no std::vector, no std::string.
    p2p_completion_t e[kOps];
    size_t got = 0, failed = 0;
    r.barrier();  // rank 1 leaves 200 ms after it
    p2ptest::fail_new_everywhere(true);
    auto t0 = Clock::now();
    while (got < kOps && seconds_since(t0) < 20) {
        size_t n = 0;
        p2p_status_t st = p2p_comm_wait(r.comm(), P2P_QUEUE_RECV, e, kOps - got, &n, 500);
        MP_CHECK(st == P2P_OK || st == P2P_ERR_TIMEOUT, "wait returned %d (%s)",
                 static_cast<int>(st), p2p_status_string(st));
        for (size_t i = 0; i < n; ++i) failed += e[i].status == P2P_ERR_PEER_FAILURE;
        got += n;
    }
    p2ptest::fail_new_everywhere(false);
    MP_CHECK(got == kOps && failed == kOps, "%zu of %zu receives completed, %zu with "
             "P2P_ERR_PEER_FAILURE, while allocations failed", got, kOps, failed);
    expect_quiet(r.comm());
    r.barrier();
    buf.release();
    r.finish();
    say("leave-oom ok");
}

} // namespace mp
