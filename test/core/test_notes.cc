/*
 * Hello and goodbye notes (Context::on_note): a note that comes before
 * its communicator's handler is set is kept for it, one of an earlier
 * generation of the id is dropped, and the ring keeps the newest ones. A
 * hello for a communicator destroyed here is answered by the context with
 * a goodbye, once, to a peer the communicator kept the address of.
 */
#include "core/context.h"
#include "core_util.h"

#include <gtest/gtest.h>

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

using Note = std::pair<uint32_t, bool>;  // rank, hello

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
        ctx_->set_note_handler(id, gen, [this](uint32_t r, bool hello) {
            got_.emplace_back(r, hello);
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
    EXPECT_EQ((std::vector<Note>{{1, true}}), got_);
    got_.clear();
    arrive(Context::kGoodbyeMagic, 3, 5, 2);   // live now
    arrive(Context::kGoodbyeMagic, 3, 4, 8);   // stale: no handler of gen 4
    EXPECT_EQ((std::vector<Note>{{2, false}}), got_);
    got_.clear();
    listen(9, 5);
    EXPECT_EQ((std::vector<Note>{{7, false}}), got_);
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
        EXPECT_EQ(Note(n - 256 + uint32_t(i), true), got_[i]) << i;
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
    // Takes the goodbye above and the answer. The answer may come first: a
    // progress thread can send it before the goodbye above arrives. Notes
    // from two ranks have no order between them.
    listen(4, 2);
    ctx_->progress().kick();  // the answer waits for a progress call
    const auto t0 = std::chrono::steady_clock::now();
    while (got().size() < 2 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // no second one
    std::vector<Note> notes = got();
    std::sort(notes.begin(), notes.end());
    EXPECT_EQ((std::vector<Note>{{3, false}, {5, false}}), notes);
    ctx_->set_note_handler(4, 2, nullptr);
}
