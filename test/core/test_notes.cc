/*
 * Hello and goodbye notes (Context::on_note): a note that comes before
 * its communicator's handler is set is kept for it, one of an earlier
 * generation of the id is dropped, and the ring keeps the newest ones.
 */
#include "core/context.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

using namespace ucxp2p;

namespace {

using Note = std::pair<uint32_t, bool>;  // rank, hello

class Notes : public ::testing::Test {
protected:
    void SetUp() override {
        setenv("UCX_TLS", "self", 0);  // no transport work needed
        ContextSettings s{};
        ASSERT_EQ(P2P_OK, context_settings_resolve(nullptr, &s));
        ASSERT_EQ(P2P_OK, Context::create(s, &ctx_));
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
