/*
 * mp_rank scenario of a receive whose first connect finds its sender gone
 * (Comm::post_locked), 2 ranks over UCX's sysv shared memory
 * (UCX_TLS=sysv,self, so that connecting attaches the peer's segment with
 * shmat; UCX_MEM_EVENTS=no, or UCX's memory hooks call libc's shmat
 * directly):
 *   first-connect-gone  rank 1 posts a receive from rank 0 before the two
 *       ever spoke. Its take-in before connecting finds nothing; then its
 *       connect's shmat -- this program's own, in front of libc's -- waits
 *       until rank 0 has sent the message (4 KiB, eager: it lands in rank
 *       1's FIFO), destroyed its context and said so, and fails with
 *       EINVAL, as the real shmat does once the sender's segment is gone.
 *       The message is in rank 1's FIFO, not yet taken in: the receive
 *       must still complete with it, intact (it used to fail, once in a
 *       CI run of test/core/readme_example.sh).
 */
#include "mp_common.h"
#include "mp_scenarios.h"

#include <dlfcn.h>
#include <errno.h>
#include <sys/shm.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

namespace {

// While armed, the next shmat waits for the gone file, then fails.
std::atomic<bool> g_armed{false};
std::atomic<int> g_held{0};
std::string g_dir;

void hold_until_gone() {
    mp::create_file(g_dir + "/connecting");
    mp::wait_for_file(g_dir + "/gone", nullptr);
}

using ShmatFn = void *(*)(int, const void *, int);

} // namespace

extern "C" __attribute__((visibility("default"))) void *shmat(int id, const void *addr,
                                                              int flags) {
    static const ShmatFn real = reinterpret_cast<ShmatFn>(dlsym(RTLD_NEXT, "shmat"));
    if (g_armed.exchange(false)) {
        g_held.fetch_add(1);
        hold_until_gone();
        errno = EINVAL;
        return reinterpret_cast<void *>(-1);
    }
    return real(id, addr, flags);
}

namespace mp {

void run_first_connect_gone(int, char **) {
    const char *dir = std::getenv("P2P_MP_DIR");
    MP_CHECK(dir != nullptr && *dir != '\0', "first-connect-gone needs P2P_MP_DIR");
    g_dir = dir;
    Rank r;
    set_identity(static_cast<int>(r.rank()), "first-connect-gone");
    MP_CHECK(r.size() == 2, "first-connect-gone runs on 2 ranks");
    constexpr size_t kLen = 4096;
    constexpr uint32_t kTid = 5;
    RegBuf buf(r.ctx(), kLen, 0xEE);
    if (r.rank() == 0) {
        wait_for_file(g_dir + "/connecting", nullptr);  // rank 1 took in: nothing yet
        fill_pattern(buf.data(), kLen, 0, 1, kTid);
        MP_OK(p2p_comm_send(r.comm(), 1, kTid, buf.data(), kLen, buf.mem(), nullptr));
        const std::vector<p2p_completion_t> got = pop(r.comm(), P2P_QUEUE_SEND, 10000);
        MP_CHECK(got.size() == 1 && got[0].status == P2P_OK,
                 "the send gave %zu completions (status %d)", got.size(),
                 got.empty() ? 0 : static_cast<int>(got[0].status));
        r.finish();
        create_file(g_dir + "/gone");
        say("first-connect-gone ok");
        return;
    }
    g_armed.store(true);
    MP_OK(p2p_comm_recv(r.comm(), 0, kTid, buf.data(), kLen, buf.mem(), nullptr));
    MP_CHECK(g_held.load() == 1, "the first connect to rank 0 called shmat %d times, "
             "expected once (UCX_TLS=sysv,self UCX_MEM_EVENTS=no)", g_held.load());
    const std::vector<p2p_completion_t> got = pop(r.comm(), P2P_QUEUE_RECV, 10000);
    MP_CHECK(got.size() == 1 && got[0].status == P2P_OK && got[0].bytes == kLen,
             "the receive gave %zu completions (status %d, %llu bytes)", got.size(),
             got.empty() ? 0 : static_cast<int>(got[0].status),
             got.empty() ? 0ULL : static_cast<unsigned long long>(got[0].bytes));
    check_pattern(buf.data(), kLen, 0, 1, kTid, "first-connect-gone");
    say("first-connect-gone ok");
    r.finish();
}

} // namespace mp
