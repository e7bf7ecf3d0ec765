/*
 * api_test: host memory p2p_mem_register cannot use. UCX registers such
 * memory without touching it, so before the check a send from an unmapped
 * range faulted inside ucp_tag_send_nbx, and a receive into read-only memory
 * killed the process from the progress thread.
 */
#include "api_util.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

using apitest::ApiFixture;
using apitest::bogus_handle;

namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

/** Three pages of anonymous memory, unmapped at the end. */
class Pages {
public:
    Pages() {
        void *p = mmap(nullptr, 3 * kPage, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        base_ = p == MAP_FAILED ? nullptr : static_cast<uint8_t *>(p);
    }
    ~Pages() {
        if (base_ != nullptr) munmap(base_, 3 * kPage);
    }
    Pages(const Pages &) = delete;
    Pages &operator=(const Pages &) = delete;
    uint8_t *page(size_t i) const { return base_ + i * kPage; }

private:
    uint8_t *base_;
};

class ApiMapping : public ApiFixture {};

} // namespace

TEST_F(ApiMapping, RegisterRefusesUnmappedMemory) {
    Pages p;
    ASSERT_NE(nullptr, p.page(0));
    ASSERT_EQ(0, munmap(p.page(1), kPage));  // a hole in the middle
    p2p_mem_h mem = bogus_handle<p2p_mem_h>();
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_register(ctx_, p.page(0), 3 * kPage, &mem));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_register(ctx_, p.page(1) + 8, 16, &mem));
    // Ending one byte into the hole, and starting in it.
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_register(ctx_, p.page(0), kPage + 1, &mem));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_register(ctx_, p.page(1) + kPage - 1, 2, &mem));
    EXPECT_EQ(bogus_handle<p2p_mem_h>(), mem) << "output written on failure";
    // The mapped pages on either side register.
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, p.page(0), kPage, &mem));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, p.page(2), kPage, &mem));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
}

TEST_F(ApiMapping, RegisterRefusesInaccessibleMemory) {
    Pages p;
    ASSERT_NE(nullptr, p.page(0));
    ASSERT_EQ(0, mprotect(p.page(2), kPage, PROT_NONE));
    p2p_mem_h mem = bogus_handle<p2p_mem_h>();
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_register(ctx_, p.page(2), 64, &mem));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_register(ctx_, p.page(0), 3 * kPage, &mem));
    EXPECT_EQ(bogus_handle<p2p_mem_h>(), mem);
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, p.page(0), 2 * kPage, &mem));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
}

// Read-only memory may be sent from; a receive into it is refused at once
// (single and batch), and nothing is posted.
TEST_F(ApiMapping, ReadOnlyMemorySendsButRefusesReceives) {
    Pages p;
    ASSERT_NE(nullptr, p.page(0));
    for (size_t i = 0; i < kPage; ++i) p.page(0)[i] = static_cast<uint8_t>(i * 7 + 1);
    ASSERT_EQ(0, mprotect(p.page(0), kPage, PROT_READ));
    p2p_mem_h ro = nullptr, rw = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, p.page(0), kPage, &ro));
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, p.page(1), kPage, &rw));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_comm_recv(comm_, 0, 1, p.page(0), 64, ro, nullptr));
    p2p_block_t blocks[2] = {{0, 2, p.page(1), 64, rw, nullptr},
                             {0, 3, p.page(0), 64, ro, nullptr}};
    size_t bad = 99;
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_comm_recv_batch(comm_, blocks, 2, &bad));
    EXPECT_EQ(1u, bad);
    EXPECT_EQ(0u, pending(P2P_QUEUE_RECV));
    // A registration spanning read-only and writable pages is read-only.
    p2p_mem_h both = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, p.page(0), 2 * kPage, &both));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM,
              p2p_comm_recv(comm_, 0, 4, p.page(1), 64, both, nullptr));
    // Sending from it works.
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 5, p.page(1), kPage, rw, nullptr));
    ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 5, p.page(0), kPage, ro, nullptr));
    p2p_completion_t rc = wait_one(P2P_QUEUE_RECV);
    p2p_completion_t sc = wait_one(P2P_QUEUE_SEND);
    EXPECT_EQ(P2P_OK, rc.status);
    EXPECT_EQ(P2P_OK, sc.status);
    EXPECT_EQ(kPage, rc.bytes);
    EXPECT_EQ(0, std::memcmp(p.page(0), p.page(1), kPage));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(both));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(ro));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(rw));
}
