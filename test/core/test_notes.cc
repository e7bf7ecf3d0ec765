/*
 * Hello and goodbye notes (Context::on_note): a note that comes before
 * its communicator's handler is set is kept for it, one of an earlier
 * generation of the id is dropped, and the ring keeps the newest ones. A
 * hello for a communicator destroyed here is answered by the context with
 * a goodbye (and a closing note), once, to a peer the communicator kept
 * the address of. Lingering endpoints (Context::Lingering) close when
 * their peer's closing note comes, when they fail, or with the context.
 */
#include "core/context.h"
#include "core_util.h"
#include "../fail_new.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace ucxp2p;

namespace {

using Note = std::pair<uint32_t, uint32_t>;  // rank, magic
constexpr uint32_t kHello = Context::kHelloMagic;
constexpr uint32_t kBye = Context::kGoodbyeMagic;
constexpr uint32_t kClosing = Context::kClosingMagic;

class Notes : public ::testing::Test {
protected:
    void SetUp() override {
        coretest::self_context(&ctx_);
    }
    void arrive(uint32_t magic, uint32_t id, uint32_t gen, uint32_t rank) {
        std::lock_guard<Mutex> lock(ctx_->worker_mu());  // as in UCX's callback
        ctx_->on_note(Context::Note{magic, id, gen, rank});
    }
    void listen(uint32_t id, uint32_t gen) {
        ctx_->set_note_handler(id, gen, [this](uint32_t r, uint32_t magic) {
            got_.emplace_back(r, magic);
        });
    }
    std::vector<Note> got() {
        std::lock_guard<Mutex> lock(ctx_->worker_mu());  // the handler runs under it
        return got_;
    }
    std::unique_ptr<Context> ctx_;
    std::vector<Note> got_;
};

} // namespace

TEST_F(Notes, EarlyNotesReachTheHandlerOfTheirGeneration) {
    arrive(Context::kHelloMagic, 3, 5, 1);
    arrive(Context::kGoodbyeMagic, 3, 4, 2);   // the id's previous generation
    arrive(0x12345678, 3, 5, 6);               // not a note
    arrive(Context::kGoodbyeMagic, 9, 5, 7);   // another id: kept for it
    listen(3, 5);
    EXPECT_EQ((std::vector<Note>{{1, kHello}}), got_);
    got_.clear();
    arrive(Context::kGoodbyeMagic, 3, 5, 2);   // live now
    arrive(Context::kGoodbyeMagic, 3, 4, 8);   // stale: no handler of gen 4
    EXPECT_EQ((std::vector<Note>{{2, kBye}}), got_);
    got_.clear();
    listen(9, 5);
    EXPECT_EQ((std::vector<Note>{{7, kBye}}), got_);
    got_.clear();
    // The stale gen-4 note of id 3 was kept, then dropped when gen 6 came.
    ctx_->set_note_handler(3, 5, nullptr);
    listen(3, 6);
    EXPECT_TRUE(got_.empty());
    ctx_->set_note_handler(3, 6, nullptr);
    ctx_->set_note_handler(9, 5, nullptr);
}

TEST_F(Notes, TheRingKeepsTheNewestInOrder) {
    const uint32_t n = 300;  // more than the ring holds (256)
    for (uint32_t r = 0; r < n; ++r) arrive(Context::kHelloMagic, 7, 1, r);
    listen(7, 1);
    ASSERT_EQ(256u, got_.size());
    for (size_t i = 0; i < got_.size(); ++i) {
        EXPECT_EQ(Note(n - 256 + uint32_t(i), kHello), got_[i]) << i;
    }
    got_.clear();
    // Handed over once: a second handler for the same id gets none of them.
    ctx_->set_note_handler(7, 1, nullptr);
    listen(7, 1);
    EXPECT_TRUE(got_.empty());
    ctx_->set_note_handler(7, 1, nullptr);
}

// The context's own worker stands in for the peers: the goodbye it says
// comes back to it, as a note from the rank we had in the retired
// communicator. Over shared memory: the self transport has no peer failure
// handling, which the goodbye's endpoint asks for.
class RetiredNotes : public Notes {
protected:
    void SetUp() override {
        const char *tls = std::getenv("UCX_TLS");
        const std::string saved = tls != nullptr ? tls : "";
        setenv("UCX_TLS", "shm", 1);
        Notes::SetUp();
        if (tls != nullptr) {
            setenv("UCX_TLS", saved.c_str(), 1);
        } else {
            unsetenv("UCX_TLS");
        }
    }
};

TEST_F(RetiredNotes, AHelloForARetiredCommunicatorGetsOneGoodbye) {
    const uint8_t *a = reinterpret_cast<const uint8_t *>(ctx_->address().get());
    const std::vector<uint8_t> self(a, a + ctx_->address().length());
    {
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        std::vector<Context::UnnamedPeer> unnamed{{1, self}, {5, self}};
        ctx_->retire_comm_locked(4, 2, /*our rank*/ 3, std::move(unnamed));
    }
    arrive(Context::kHelloMagic, 4, 2, 1);
    arrive(Context::kHelloMagic, 4, 2, 1);     // again: answered once
    arrive(Context::kHelloMagic, 4, 1, 5);     // an earlier generation: not ours
    arrive(Context::kHelloMagic, 4, 2, 7);     // not kept (it had our goodbye)
    arrive(Context::kGoodbyeMagic, 4, 2, 5);   // a goodbye is not answered
    // Takes the goodbye above and the answer: a goodbye, and that its
    // endpoint closes (so that the peer's endpoint does not linger). The
    // answer may come first: a progress thread can send it before the
    // goodbye above arrives. Notes from two ranks have no order between
    // them.
    listen(4, 2);
    ctx_->progress().kick();  // the answer waits for a progress call
    const auto t0 = std::chrono::steady_clock::now();
    while (got().size() < 3 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // no second one
    std::vector<Note> notes = got();
    std::sort(notes.begin(), notes.end());
    EXPECT_EQ((std::vector<Note>{{3, kBye}, {3, kClosing}, {5, kBye}}), notes);
    ctx_->set_note_handler(4, 2, nullptr);
}

namespace {

void no_error(void *, ucp_ep_h, ucs_status_t) {}

// Endpoints to our own worker (over shared memory, as RetiredNotes) stand
// in for a destroyed communicator's: what linger_locked takes and when
// the context lets them go.
class Lingering : public RetiredNotes {
protected:
    ucp_ep_h connect_self() {
        ucp_ep_params_t p = {};
        p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                       UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
        p.address = ctx_->address().get();
        p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
        p.err_handler.cb = no_error;
        ucp_ep_h ep = nullptr;
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        EXPECT_EQ(UCS_OK, ucp_ep_create(ctx_->worker(), &p, &ep));
        return ep;
    }
    void linger(ucp_ep_h ep, uint32_t id, uint32_t gen, uint32_t rank, uint32_t pid = 0) {
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        ctx_->linger_locked({{id, gen, rank, ep, Context::Lingering::kNotDue, pid}}, owner_);
    }
    size_t lingering() {
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        return ctx_->lingering_count();
    }
    /** Progress until done() holds (true), or 10 s pass (false). */
    template <typename Done> bool progress_until(Done done) {
        const auto t0 = std::chrono::steady_clock::now();
        while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
            ctx_->progress().kick();
            if (done()) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        return false;
    }
    /** Progress until every endpoint is closed and the owner let go. */
    bool released() {
        return progress_until([this] { return lingering() == 0 && owner_.use_count() == 1; });
    }
    std::shared_ptr<int> owner_ = std::make_shared<int>(0);
};

} // namespace

TEST_F(Lingering, ItsPeersClosingNoteClosesIt) {
    linger(connect_self(), 4, 2, 1);
    EXPECT_EQ(1u, lingering());
    EXPECT_EQ(2, owner_.use_count());
    arrive(kClosing, 4, 3, 1);  // another generation of the id
    arrive(kClosing, 4, 2, 5);  // another rank
    arrive(kBye, 4, 2, 1);      // a goodbye is not a closing note
    ctx_->progress().kick();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(1u, lingering());
    arrive(kClosing, 4, 2, 1);
    EXPECT_TRUE(released()) << lingering() << " lingering, owner held "
                            << owner_.use_count() << " times";
    // The notes it did not take wait for a communicator of their own.
    listen(4, 3);
    EXPECT_EQ((std::vector<Note>{{1, kClosing}}), got());
    ctx_->set_note_handler(4, 3, nullptr);
}

TEST_F(Lingering, OneThatFailsIsClosed) {
    ucp_ep_h ep = connect_self();
    linger(ep, 6, 1, 2);
    linger(connect_self(), 6, 1, 3);
    {
        std::lock_guard<Mutex> lock(ctx_->worker_mu());  // as in UCX's callback
        ctx_->on_lingering_error(ep);
    }
    EXPECT_TRUE(progress_until([this] { return lingering() == 1; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(1u, lingering());  // the other one stays
    arrive(kClosing, 6, 1, 3);
    EXPECT_TRUE(released());
}

// A same-host peer whose process is gone, which UCX 1.13 may never report
// (an endpoint it never answered): the periodic check closes the endpoint
// (every P2P_PEER_TIMEOUT_MS / 4, 750 ms here). A peer alive stays.
TEST_F(Lingering, OneWhosePeersProcessIsGoneIsClosed) {
    auto child = [] {
        const pid_t pid = fork();
        if (pid == 0) _exit(0);
        return pid;
    };
    const pid_t reaped = child(), zombie = child();
    ASSERT_GT(reaped, 0);
    ASSERT_GT(zombie, 0);
    ASSERT_EQ(reaped, waitpid(reaped, nullptr, 0));
    // The zombie: exited, not reaped yet (its /proc entry says Z).
    siginfo_t si = {};
    ASSERT_EQ(0, waitid(P_PID, static_cast<id_t>(zombie), &si, WEXITED | WNOWAIT));
    linger(connect_self(), 11, 1, 1, static_cast<uint32_t>(reaped));
    linger(connect_self(), 11, 1, 2, static_cast<uint32_t>(zombie));
    linger(connect_self(), 11, 1, 3, static_cast<uint32_t>(getpid()));
    linger(connect_self(), 11, 1, 4);  // another host's peer: not checked
    EXPECT_TRUE(progress_until([this] { return lingering() == 2; })) << lingering();
    std::this_thread::sleep_for(std::chrono::milliseconds(1600));  // two more periods
    ctx_->progress().kick();
    EXPECT_EQ(2u, lingering());
    waitpid(zombie, nullptr, 0);
    arrive(kClosing, 11, 1, 3);
    arrive(kClosing, 11, 1, 4);
    EXPECT_TRUE(released()) << lingering() << " lingering";
}

// Destroys one after another, each leaving one endpoint: all linger and
// all close (the room grows geometrically, not by one each time).
TEST_F(Lingering, EndpointsFromManyDestroysAllLingerAndClose) {
    const uint32_t n = 40;
    for (uint32_t i = 0; i < n; ++i) linger(connect_self(), 20 + i, 1, 1);
    EXPECT_EQ(n, lingering());
    EXPECT_EQ(long(n) + 1, owner_.use_count());
    for (uint32_t i = 0; i < n; ++i) arrive(kClosing, 20 + i, 1, 1);
    EXPECT_TRUE(released()) << lingering() << " lingering";
}

TEST_F(Lingering, TheContextClosesWhatStillLingersWhenItGoes) {
    linger(connect_self(), 7, 1, 1);
    EXPECT_EQ(2, owner_.use_count());
    ctx_.reset();
    EXPECT_EQ(1, owner_.use_count());
}

TEST_F(Lingering, OutOfMemoryNoneIsTakenAndTheCallerClosesThem) {
    ucp_ep_h ep = connect_self();
    bool taken = true;
    {
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        const std::vector<Context::Lingering> eps{{8, 1, 1, ep, Context::Lingering::kNotDue, 0}};
        p2ptest::NoMemory no_memory;
        taken = ctx_->linger_locked(eps, owner_);
    }
    EXPECT_FALSE(taken);
    EXPECT_EQ(0u, lingering());
    EXPECT_EQ(1, owner_.use_count());
    std::lock_guard<Mutex> lock(ctx_->worker_mu());
    ucp_request_param_t prm = {};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void *req = ucp_ep_close_nbx(ep, &prm);
    if (UCS_PTR_IS_PTR(req)) ucp_request_free(req);
}
