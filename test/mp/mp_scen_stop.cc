/*
 * mp_rank scenario about a peer that stops (SIGSTOP) before we connect:
 *   stopped-peer  (2 ranks) rank 1 sends rank 0 its pid and stops itself;
 *       only then does rank 0 post a send to it, which creates rank 0's
 *       endpoint to rank 1. Rank 0 then shuts its communicator down: the
 *       shutdown must return within its bound and the send complete exactly
 *       once (P2P_ERR_CANCELED, or P2P_OK where the transport finished it
 *       locally), and destroying the communicator must return although the
 *       endpoint's close may not end while rank 1 is stopped (over tcp with
 *       UCX 1.13 it usually does not: destroy gives up on it after its
 *       bound). Rank 0 resumes rank 1 and keeps its context (and its
 *       progress thread) alive for a second, when what UCX still had
 *       pending on that endpoint ends: nothing may reach the destroyed
 *       communicator (a sanitizer build reports it). Rank 1 then destroys
 *       its communicator as usual.
 *   stopped-peer killed  as stopped-peer, but rank 1 never talks to rank 0
 *       (its pid goes through a file named by their common parent, p2prun,
 *       and a bootstrap barrier) and rank 0 posts a receive, an 8-byte and
 *       a 4 MiB send to the stopped rank (its endpoint's wireup cannot
 *       finish) and then kills it: every one must complete within
 *       2 peer timeouts + 5 s, P2P_ERR_PEER_FAILURE (the 8-byte send may
 *       also end P2P_OK, finished locally). p2prun then reports rank 1's
 *       SIGKILL (run it with --keep-going).
 *   stalled-bulk  (2 ranks, UCX_TLS=tcp: the tcp bulk path of
 *       core/tcp_bulk.h) rank 1 posts 16 sends of 4 MiB to rank 0 and stops
 *       itself (SIGSTOP) with their requests out; rank 0, whose receives
 *       wait for the payloads, shuts its communicator down: that must
 *       return within its bound (2 peer timeouts + 1 s, and 5 s for a
 *       loaded machine) although reading each payload would wait a peer
 *       timeout, and every receive complete once (P2P_OK, or
 *       P2P_ERR_CANCELED). Rank 0 then resumes rank 1, which destroys its
 *       communicator.
 *   fifo-room N all|some  (2 ranks, shared memory) rank 1 posts N 8-byte
 *       receives and stops itself; rank 0 then sends it N 8-byte messages
 *       and, 300 ms later, counts the sends still in flight: those UCX
 *       could not put in rank 1's receive FIFO. all: none may be (the
 *       FIFO the context asks for by default holds them); some: at least
 *       one must be (a FIFO the user sized smaller). Rank 0 then resumes
 *       rank 1, and every message must arrive intact.
 */
#include "mp_common.h"
#include "mp_scenarios.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>

namespace mp {

namespace {

/** Rank 0 of "stopped-peer killed": the operations naming the stopped
 *  rank (pid) are posted before its endpoint can be wired up, then it
 *  dies; each must complete. */
void posts_to_a_peer_killed_while_stopped(Rank &r, pid_t pid) {
    constexpr size_t kBig = size_t(4) << 20;
    RegBuf big(r.ctx(), 2 * kBig, 0x5A);
    MP_OK(p2p_comm_recv(r.comm(), 1, 9, big.data(), 8, big.mem(), ctx_of(9)));
    MP_OK(p2p_comm_recv(r.comm(), 1, 10, big.data(), kBig, big.mem(), ctx_of(10)));
    MP_OK(p2p_comm_send(r.comm(), 1, 11, big.data() + kBig, 8, big.mem(), ctx_of(11)));
    MP_OK(p2p_comm_send(r.comm(), 1, 12, big.data() + kBig, 65536, big.mem(), ctx_of(12)));
    MP_OK(p2p_comm_send(r.comm(), 1, 13, big.data() + kBig, kBig, big.mem(), ctx_of(13)));
    std::this_thread::sleep_for(std::chrono::seconds(1));
    MP_CHECK(kill(pid, SIGKILL) == 0, "cannot kill rank 1");
    Clock::time_point t0 = Clock::now();
    const double peer_timeout_s = env_ul("P2P_PEER_TIMEOUT_MS", 2000) / 1000.0;
    std::vector<p2p_completion_t> got;
    while (got.size() < 5 && seconds_since(t0) < 2 * peer_timeout_s + 5) {
        for (p2p_queue_t q : {P2P_QUEUE_SEND, P2P_QUEUE_RECV}) {
            std::vector<p2p_completion_t> c = pop(r.comm(), q, 0);
            got.insert(got.end(), c.begin(), c.end());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    MP_CHECK(got.size() == 5, "%zu of 5 operations naming the killed rank completed "
             "%.1f s after its death", got.size(), seconds_since(t0));
    for (const p2p_completion_t &c : got) {
        const bool small_send = c.tensor_id == 11;
        MP_CHECK(c.status == P2P_ERR_PEER_FAILURE || (small_send && c.status == P2P_OK),
                 "tensor %u: status %d, expected P2P_ERR_PEER_FAILURE", c.tensor_id,
                 static_cast<int>(c.status));
    }
    say("operations naming the killed rank completed %.1f s after its death",
        seconds_since(t0));
    r.destroy_comm();
    say("stopped-peer ok");
    r.finish();
}

/** Rank 1 tells rank 0 its pid (tensor 1, 8 bytes of buf); rank 0 gets
 *  it (rank 1 gets 0). */
pid_t share_pid(Rank &r, const RegBuf &buf) {
    const std::vector<Xfer> pid_msg = {{r.rank() == 1, 1 - r.rank(), 1, 8, 0}};
    if (r.rank() == 1) {
        uint64_t pid = static_cast<uint64_t>(getpid());
        std::memcpy(buf.data(), &pid, sizeof(pid));
        MP_OK(p2p_comm_send(r.comm(), 0, 1, buf.data(), 8, buf.mem(), ctx_of(0)));
    } else {
        MP_OK(p2p_comm_recv(r.comm(), 1, 1, buf.data(), 8, buf.mem(), ctx_of(0)));
    }
    collect(r.comm(), pid_msg, 30);
    uint64_t pid64 = 0;
    if (r.rank() == 0) std::memcpy(&pid64, buf.data(), sizeof(pid64));
    return static_cast<pid_t>(pid64);
}

} // namespace

void run_stopped_peer(int argc, char **argv) {
    const bool killed = argc > 0 && std::strcmp(argv[0], "killed") == 0;
    Rank r;
    set_identity(static_cast<int>(r.rank()), "stopped-peer");
    MP_CHECK(r.size() == 2, "stopped-peer needs 2 ranks");
    if (killed) {
        // No message from rank 1: UCX on rank 0 must learn nothing of it
        // before rank 0 names it.
        const std::string file = "/tmp/mp-stopped-peer." + std::to_string(getppid());
        if (r.rank() == 1) {
            FILE *f = std::fopen(file.c_str(), "w");
            MP_CHECK(f != nullptr && std::fprintf(f, "%d\n", static_cast<int>(getpid())) > 0 &&
                         std::fclose(f) == 0, "cannot write %s", file.c_str());
            r.barrier();
            std::raise(SIGSTOP);
            pause();  // killed here
        }
        r.barrier();
        int pid = 0;
        FILE *f = std::fopen(file.c_str(), "r");
        MP_CHECK(f != nullptr && std::fscanf(f, "%d", &pid) == 1, "cannot read %s",
                 file.c_str());
        std::fclose(f);
        std::remove(file.c_str());
        wait_stopped(pid);
        posts_to_a_peer_killed_while_stopped(r, pid);
        return;
    }
    RegBuf buf(r.ctx(), 64, 0x3C);
    const pid_t pid = share_pid(r, buf);
    if (r.rank() == 1) {
        std::raise(SIGSTOP);  // rank 0 lets us go on once its communicator is gone
        r.barrier();          // rank 0 is done checking
        say("stopped-peer ok");
        r.finish();
        return;
    }
    wait_stopped(pid);
    MP_OK(p2p_comm_send(r.comm(), 1, 2, buf.data() + 8, 8, buf.mem(), ctx_of(0)));
    Clock::time_point t0 = Clock::now();
    MP_OK(p2p_comm_shutdown(r.comm()));
    const double took = seconds_since(t0);
    // The bound: the endpoint's flush waits one peer timeout before the
    // forced close; the shutdown's own deadline is 2 timeouts + 1 s (and
    // 5 s for a loaded machine).
    const double peer_timeout_s = env_ul("P2P_PEER_TIMEOUT_MS", 2000) / 1000.0;
    MP_CHECK(took < 2 * peer_timeout_s + 1 + 5, "shutdown took %.1f s", took);
    std::vector<p2p_completion_t> c = pop(r.comm(), P2P_QUEUE_SEND, 0);
    MP_CHECK(c.size() == 1 && (c[0].status == P2P_ERR_CANCELED || c[0].status == P2P_OK),
             "the send to the stopped rank after shutdown: %zu completions (status "
             "%d), expected one, P2P_ERR_CANCELED or P2P_OK", c.size(),
             c.empty() ? 0 : static_cast<int>(c[0].status));
    say("send to the stopped rank: %s; shutdown took %.1f s",
        c[0].status == P2P_OK ? "ok" : "canceled", took);
    r.destroy_comm();
    MP_CHECK(kill(pid, SIGCONT) == 0, "cannot resume rank 1");
    std::this_thread::sleep_for(std::chrono::seconds(1));
    r.barrier();
    say("stopped-peer ok");
    r.finish();
}

void run_stalled_bulk(int, char **) {
    constexpr size_t kN = 16, kBig = size_t(4) << 20;
    Rank r;
    set_identity(static_cast<int>(r.rank()), "stalled-bulk");
    MP_CHECK(r.size() == 2, "stalled-bulk needs 2 ranks");
    RegBuf small(r.ctx(), 64, 0x3C);
    RegBuf big(r.ctx(), kN * kBig, 0x5A);
    if (r.rank() == 0) {
        for (size_t i = 0; i < kN; ++i) {
            MP_OK(p2p_comm_recv(r.comm(), 1, 2, big.data() + i * kBig, kBig, big.mem(),
                                ctx_of(i)));
        }
    }
    const pid_t pid = share_pid(r, small);
    if (r.rank() == 1) {
        r.barrier();  // rank 0's receives are posted
        for (size_t i = 0; i < kN; ++i) {
            MP_OK(p2p_comm_send(r.comm(), 0, 2, big.data() + i * kBig, kBig, big.mem(),
                                ctx_of(i)));
        }
        std::raise(SIGSTOP);  // rank 0 resumes us once its communicator is gone
        r.destroy_comm();
        r.barrier();
        say("stalled-bulk ok");
        r.finish();
        return;
    }
    r.barrier();
    wait_stopped(pid);
    Clock::time_point t0 = Clock::now();
    MP_OK(p2p_comm_shutdown(r.comm()));
    const double took = seconds_since(t0);
    const double peer_timeout_s = env_ul("P2P_PEER_TIMEOUT_MS", 2000) / 1000.0;
    MP_CHECK(took < 2 * peer_timeout_s + 1 + 5, "shutdown took %.1f s", took);
    std::vector<int> seen(kN, 0);
    size_t ok = 0;
    for (const p2p_completion_t &c : pop(r.comm(), P2P_QUEUE_RECV, 0)) {
        const size_t i = index_of(c.user_context);
        MP_CHECK(i < kN && ++seen[i] == 1, "receive %zu completed twice (or unknown)", i);
        MP_CHECK(c.status == P2P_OK || c.status == P2P_ERR_CANCELED,
                 "receive %zu: status %d, expected P2P_OK or P2P_ERR_CANCELED", i,
                 static_cast<int>(c.status));
        ok += c.status == P2P_OK;
    }
    for (size_t i = 0; i < kN; ++i) MP_CHECK(seen[i] == 1, "receive %zu never completed", i);
    say("shutdown with a stalled tcp sender took %.1f s; %zu of %zu received", took, ok, kN);
    r.destroy_comm();
    MP_CHECK(kill(pid, SIGCONT) == 0, "cannot resume rank 1");
    r.barrier();
    say("stalled-bulk ok");
    r.finish();
}

void run_fifo_room(int argc, char **argv) {
    const bool all = argc == 2 && std::strcmp(argv[1], "all") == 0;
    MP_CHECK(argc == 2 && (all || std::strcmp(argv[1], "some") == 0), "fifo-room N all|some");
    const uint32_t n = static_cast<uint32_t>(std::strtoul(argv[0], nullptr, 10));
    MP_CHECK(n > 0 && n <= 4096, "fifo-room: N from 1 to 4096");
    Rank r;
    set_identity(static_cast<int>(r.rank()), "fifo-room");
    MP_CHECK(r.size() == 2, "fifo-room needs 2 ranks");
    // Endpoints wired up both ways first (a new one's first messages wait
    // on its peer's progress).
    ExchangeOptions opt;
    exchange(r, {0, 1}, {8}, 10, opt);
    RegBuf buf(r.ctx(), 64 + size_t(n) * 8, 0x3C);
    std::vector<Xfer> msgs;
    for (uint32_t i = 0; i < n; ++i) {
        msgs.push_back({r.rank() == 0, 1 - r.rank(), 100 + i, 8, 64 + size_t(i) * 8});
    }
    if (r.rank() == 1) {
        for (size_t i = 0; i < msgs.size(); ++i) {
            MP_OK(p2p_comm_recv(r.comm(), 0, msgs[i].tid, buf.data() + msgs[i].off, 8,
                                buf.mem(), ctx_of(i)));
        }
    }
    const pid_t pid = share_pid(r, buf);
    if (r.rank() == 1) {
        std::raise(SIGSTOP);  // rank 0 resumes us after its sends
        collect(r.comm(), msgs, 30);
        for (const Xfer &x : msgs) {
            check_pattern(buf.data() + x.off, x.len, 0, 1, x.tid, "fifo-room");
        }
        r.barrier();
        say("fifo-room ok");
        r.finish();
        return;
    }
    wait_stopped(pid);
    for (size_t i = 0; i < msgs.size(); ++i) {
        const Xfer &x = msgs[i];
        fill_pattern(buf.data() + x.off, x.len, 0, 1, x.tid);
        MP_OK(p2p_comm_send(r.comm(), 1, x.tid, buf.data() + x.off, x.len, buf.mem(),
                            ctx_of(i)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    size_t in_flight = 0;
    MP_OK(p2p_comm_pending(r.comm(), P2P_QUEUE_SEND, &in_flight));
    say("%u sends of 8 bytes to a stopped rank: %zu still in flight", n, in_flight);
    MP_CHECK(kill(pid, SIGCONT) == 0, "cannot resume rank 1");
    MP_CHECK(all ? in_flight == 0 : in_flight > 0,
             all ? "%zu of %u sends found the stopped rank's FIFO full"
                 : "%zu of %u sends in flight: all fit in a FIFO that should be smaller",
             in_flight, n);
    collect(r.comm(), msgs, 30);
    r.barrier();
    say("fifo-room ok");
    r.finish();
}

} // namespace mp
