/*
 * mp_rank scenario of a receiver that first names a peer after the peer
 * died:
 *   dead-first  (2 ranks) rank 1 sends two small messages to rank 0 and,
 *       once they completed, kill -9s itself (no goodbye). Rank 0 has
 *       never named rank 1 (no endpoint of its own to it); it waits until
 *       rank 1's process is gone, then receives both messages (a single
 *       post and a batch of one): they arrived before the death, so both
 *       must succeed. Before, the receive's post connected to the dead rank
 *       first: over shared memory that failed the post with
 *       P2P_ERR_TRANSPORT (UCX could not attach the dead rank's segment);
 *       over tcp the refused connection was logged as a UCX error. Now the
 *       post finds the process gone and takes the message without
 *       connecting. A receive of a message never sent, and a send, then
 *       fail with P2P_ERR_PEER_FAILURE, not a transport error.
 *   dead-first unprogressed  (shared memory) the same, but rank 0 runs
 *       serialized and, while it waits, keeps calling the library without
 *       progressing the worker (registrations), so the backstop thread stays
 *       away: the messages sit in its receive FIFO, not yet taken in, when
 *       it posts (what a receiver busy elsewhere, as in CUDA setup, met on a
 *       lent H200). The post must take them in before it connects.
 *   dead-first unseen  rank 0 runs in a pid namespace of its own, so it
 *       cannot see rank 1's process (another host, another container): it
 *       cannot learn of the death before connecting, the endpoint cannot
 *       be created, and only the arrived messages let its receives
 *       through. It posts the batched message's receive twice in one
 *       batch: one block gets it, the other must end with
 *       P2P_ERR_PEER_FAILURE (it was posted and waited forever). Needs
 *       unshare(CLONE_NEWPID) (root); without it the rank says "unseen
 *       unavailable" and runs as plain dead-first.
 * The dead rank's pid comes through the file P2P_MP_PID_FILE names.
 */
#include "mp_common.h"
#include "mp_scenarios.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <sched.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace mp {

namespace {

/** Wait until p2prun has reaped pid (every thread gone, its descriptors
 *  closed: a zombie leader may still have threads holding its sockets),
 *  stay_busy meanwhile. */
void wait_gone(pid_t pid, p2p_context_h ctx) {
    const Clock::time_point t0 = Clock::now();
    // /proc, not kill(pid, 0): in a pid namespace of its own (unseen) this
    // rank's pids are not rank 1's, while /proc still lists the launcher's.
    const std::string proc = "/proc/" + std::to_string(pid);
    for (;;) {
        struct stat sb;
        if (stat(proc.c_str(), &sb) != 0 && errno == ENOENT) return;
        MP_CHECK(seconds_since(t0) < 30, "rank 1 (pid %d) never died", static_cast<int>(pid));
        stay_busy(ctx);
    }
}

/** unseen: go on in a child in a new pid namespace; this process waits
 *  for it and ends as it ended. False when that is not allowed here. */
bool enter_own_pid_namespace() {
    if (unshare(CLONE_NEWPID) != 0) {
        say("unseen unavailable: unshare(CLONE_NEWPID): %s", std::strerror(errno));
        return false;
    }
    const pid_t child = fork();
    MP_CHECK(child >= 0, "fork: %s", std::strerror(errno));
    if (child == 0) return true;
    int st = 0;
    while (waitpid(child, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(st)) {
        signal(WTERMSIG(st), SIG_DFL);
        raise(WTERMSIG(st));
    }
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}

} // namespace

void run_dead_first(int argc, char **argv) {
    const std::string mode = argc > 0 ? argv[0] : "";
    const bool unprogressed = mode == "unprogressed";
    bool unseen = mode == "unseen";
    MP_CHECK(argc == 0 || ((unprogressed || unseen) && argc == 1),
             "dead-first [unprogressed|unseen]");
    const char *rank_env = std::getenv("RANK");
    if (unseen && rank_env != nullptr && std::string(rank_env) == "0") {
        unseen = enter_own_pid_namespace();
    }
    serialize_victim(1);
    if (unprogressed) setenv("P2P_THREAD_MODE", "serialized", 1);
    const char *pid_file = std::getenv("P2P_MP_PID_FILE");
    MP_CHECK(pid_file != nullptr && *pid_file != '\0', "dead-first needs P2P_MP_PID_FILE");
    Rank r;
    set_identity(static_cast<int>(r.rank()), "dead-first");
    MP_CHECK(r.size() == 2, "dead-first runs on 2 ranks");
    const uint32_t kSingle = 7, kBatched = 8, kNever = 9;
    // Message i: tensor kSingle + i, at offset i * 4096 on the sender and
    // (2 + i) * 4096 on the receiver.
    const std::vector<Xfer> sends = {{true, 0, kSingle, 64, 0},
                                     {true, 0, kBatched, 4096, 4096}};
    const std::vector<Xfer> recvs = {{false, 1, kSingle, 64, 2 * 4096},
                                     {false, 1, kBatched, 4096, 3 * 4096}};
    RegBuf buf(r.ctx(), 4 * 4096, 0xEE);
    if (r.rank() == 1) {
        for (size_t i = 0; i < sends.size(); ++i) {
            const Xfer &x = sends[i];
            fill_pattern(buf.data() + x.off, x.len, 1, 0, x.tid);
            MP_OK(p2p_comm_send(r.comm(), 0, x.tid, buf.data() + x.off, x.len, buf.mem(),
                                ctx_of(i)));
        }
        collect(r.comm(), sends, 30);
        write_pid_file(pid_file);
        say("dying now");
        die_now(r.comm(), 50);
    }
    p2p_context_h busy = unprogressed ? r.ctx() : nullptr;
    wait_for_file(pid_file, busy);
    wait_gone(read_pid_file(pid_file), busy);
    say("rank 1 is gone: receiving what it sent");
    // One single post and one batch of one (the two posting paths).
    MP_OK(p2p_comm_recv(r.comm(), 1, recvs[0].tid, buf.data() + recvs[0].off, recvs[0].len,
                        buf.mem(), ctx_of(0)));
    p2p_block_t b[2] = {{1, recvs[1].tid, buf.data() + recvs[1].off, recvs[1].len, buf.mem(),
                         ctx_of(1)},
                        {1, recvs[1].tid, buf.data(), recvs[1].len, buf.mem(), ctx_of(3)}};
    size_t bad = 77;
    MP_OK(p2p_comm_recv_batch(r.comm(), b, unseen ? 2 : 1, &bad));
    if (unseen) {
        // One message, two blocks: the one it did not match ends as a
        // peer failure (ctx_of(3)), whichever block that is.
        std::vector<p2p_completion_t> got;
        const Clock::time_point t0 = Clock::now();
        while (got.size() < 3 && seconds_since(t0) < 30) {
            for (const p2p_completion_t &c : pop(r.comm(), P2P_QUEUE_RECV, 500)) got.push_back(c);
        }
        MP_CHECK(got.size() == 3, "unseen: 3 receives (one batch of 2) gave %zu completions "
                 "in 30 s", got.size());
        size_t ok = 0, failed = 0;
        int other = 0;
        for (const p2p_completion_t &c : got) {
            if (c.status == P2P_OK) {
                ++ok;
                const size_t i = index_of(c.user_context);
                MP_CHECK(i <= 1 || i == 3, "unseen: completion of context %zu", i);
                if (i == 3) std::memcpy(buf.data() + recvs[1].off, buf.data(), recvs[1].len);
            } else if (c.status == P2P_ERR_PEER_FAILURE) {
                ++failed;
            } else {
                other = c.status;
            }
        }
        MP_CHECK(ok == 2 && failed == 1, "unseen: %zu OK and %zu P2P_ERR_PEER_FAILURE "
                 "(another: %d), expected 2 and 1", ok, failed, other);
    } else {
        collect(r.comm(), recvs, 30);
    }
    for (const Xfer &x : recvs) {
        check_pattern(buf.data() + x.off, x.len, 1, 0, x.tid, "dead-first");
    }
    // Nothing more can come: a post naming the dead rank fails now, or its
    // receive completes with P2P_ERR_PEER_FAILURE.
    const p2p_status_t st = p2p_comm_recv(r.comm(), 1, kNever, buf.data(), 8, buf.mem(),
                                          ctx_of(2));
    if (st == P2P_OK) {
        const std::vector<p2p_completion_t> got = pop(r.comm(), P2P_QUEUE_RECV, 30000);
        MP_CHECK(got.size() == 1 && got[0].status == P2P_ERR_PEER_FAILURE,
                 "a receive from the dead rank gave %zu completions (status %d)",
                 got.size(), got.empty() ? 0 : static_cast<int>(got[0].status));
    } else {
        // unseen: UCX's endpoint to a process gone where this rank cannot
        // see it may fail to be created (shared memory: its segment is gone).
        MP_CHECK(st == P2P_ERR_PEER_FAILURE || (unseen && st == P2P_ERR_TRANSPORT),
                 "a receive from the dead rank: post gave %s", p2p_status_string(st));
    }
    const p2p_status_t sst = p2p_comm_send(r.comm(), 1, kNever, buf.data(), 8, buf.mem(),
                                           nullptr);
    MP_CHECK(sst == P2P_ERR_PEER_FAILURE || (unseen && sst == P2P_ERR_TRANSPORT),
             "a send to the dead rank: post gave %s", p2p_status_string(sst));
    expect_quiet(r.comm());
    say("dead-first ok");
    buf.release();
    r.finish();
}

} // namespace mp
