/*
 * core/tcp_bulk.h on loopback, what a Server and its Clients do when all
 * goes well or the sender withdraws (failures: test_tcp_bulk_faults.cc).
 * Timeouts are generous (slow, noisy CI machines); no test asserts that
 * something is fast.
 */
#include "tcp_bulk_util.h"

#include <ifaddrs.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace tbtest;

TEST(TcpBulkServer, PublishesPortTokenAndAddresses) {
    std::unique_ptr<Server> s = start_server();
    ASSERT_TRUE(s);
    const Address &a = s->address();
    EXPECT_NE(0u, a.port);
    EXPECT_NE(0u, a.token);
    ASSERT_LE(a.naddr, 4u);
    for (unsigned i = 0; i < a.naddr; ++i) {
        EXPECT_NE(127u, ntohl(a.ipv4[i]) >> 24) << "loopback published";
    }
    EXPECT_EQ(0u, s->connections());
    std::unique_ptr<Server> t = start_server();
    ASSERT_TRUE(t);
    EXPECT_NE(a.port, t->address().port);
}

TEST(TcpBulk, ReadsWholeBufferOverOneTwoFourLanesAndPools) {
    std::unique_ptr<Server> s = start_server();
    ASSERT_TRUE(s);
    const size_t n = 4 * Client::kMinPart;  // 4 parts at most
    std::vector<uint8_t> src = pattern(n, 1);
    s->offer(7, src.data(), n);
    for (unsigned lanes : {1u, 2u, 4u}) {
        Client c(s->address(), true, lanes, kIo);
        for (int round = 0; round < 2; ++round) {
            std::vector<uint8_t> dst(n, 0xee);
            int err = 0;
            ASSERT_EQ(ReadResult::OK, c.read(7, addr_of(src.data()), 0, n, dst.data(), &err))
                << "lanes " << lanes << ": " << std::strerror(err);
            EXPECT_TRUE(dst == src) << "lanes " << lanes;
            // The first read made one connection per lane, the second none.
            EXPECT_EQ(lanes, c.connections()) << "round " << round;
        }
        // The previous Client's connections end on their own time.
        EXPECT_TRUE(wait_until([&] { return s->connections() == lanes; }));
    }
}

TEST(TcpBulk, ReadsSubrangesIntoTheirPlace) {
    std::unique_ptr<Server> s = start_server();
    ASSERT_TRUE(s);
    const size_t n = 4 * Client::kMinPart;
    std::vector<uint8_t> src = pattern(n, 2);
    s->offer(1, src.data(), n);
    const struct { uint64_t off, len; } cases[] = {
        {0, 1}, {1, 3}, {12345, (1 << 20) + 7}, {n - 100, 100}, {n / 2, n / 2},
        {65536, 3 * 65536 + 1}, {0, n - 1},
    };
    for (unsigned lanes : {1u, 3u, 4u}) {
        Client c(s->address(), true, lanes, kIo);
        for (const auto &k : cases) {
            std::vector<uint8_t> dst(n, 0xee);
            int err = 0;
            ASSERT_EQ(ReadResult::OK,
                      c.read(1, addr_of(src.data()), k.off, k.len, dst.data(), &err))
                << k.off << "+" << k.len << ": " << std::strerror(err);
            EXPECT_TRUE(std::equal(src.begin() + k.off, src.begin() + k.off + k.len,
                                   dst.begin() + k.off))
                << k.off << "+" << k.len;
            EXPECT_TRUE(std::all_of(dst.begin(), dst.begin() + k.off,
                                    [](uint8_t b) { return b == 0xee; }));
            EXPECT_TRUE(std::all_of(dst.begin() + k.off + k.len, dst.end(),
                                    [](uint8_t b) { return b == 0xee; }));
        }
        EXPECT_LE(c.connections(), lanes);
    }
}

// The server pads each payload so that it starts kPayloadSkew bytes past
// its source's page offset in the stream after the header (where the
// kernel's page fragment usually starts over: tcp_bulk_wire.h), whatever
// the source's alignment; the pad is zeros and the bytes are the offer's.
TEST(TcpBulk, PadPutsThePayloadACacheLinePastItsSourcesPageOffset) {
    std::unique_ptr<Server> s = start_server();
    ASSERT_TRUE(s);
    const size_t n = 3 * 4096;
    std::vector<uint8_t> mem = pattern(n + 4096, 3);
    const uintptr_t page = (addr_of(mem.data()) + 4095) & ~uintptr_t(4095);
    const uint8_t *src = mem.data() + (page - addr_of(mem.data()));
    s->offer(4, src, n);
    Raw r(s->address().port);
    ASSERT_EQ(0, r.hello(s->address().token));
    for (uint64_t off : {0, 1, 16, 24, 40, 64, 2048, 4095, 4096 + 88}) {
        const uint64_t len = n - off;
        ASSERT_TRUE(r.request(4, addr_of(src), off, len));
        wire::Header h{};
        ASSERT_EQ(tcp::Io::OK, r.get(&h, sizeof(h))) << off;  // the raw header
        ASSERT_EQ(wire::kOk, h.status) << off;
        ASSERT_EQ(len, h.len) << off;
        ASSERT_LT(h.pad, wire::kMaxPad) << off;
        EXPECT_EQ(0u, h.reserved);
        EXPECT_EQ((off + wire::kPayloadSkew) % 4096, (sizeof(h) + h.pad) % 4096) << off;
        std::vector<uint8_t> pad(h.pad, 0xee), got(len);
        ASSERT_EQ(tcp::Io::OK, r.get(pad.data(), pad.size())) << off;
        EXPECT_TRUE(std::all_of(pad.begin(), pad.end(), [](uint8_t b) { return b == 0; }));
        ASSERT_EQ(tcp::Io::OK, r.get(got.data(), got.size())) << off;
        EXPECT_TRUE(std::equal(got.begin(), got.end(), src + off)) << off;
        wire::Trailer t{};
        ASSERT_TRUE(r.get(&t));
        EXPECT_EQ(wire::kOk, t.status) << off;
    }
}

TEST(TcpBulk, ZeroLengthReadNeedsNoConnection) {
    Address nobody{};  // port 0: no server at all
    Client c(nobody, true, 2, kIo);
    int err = 0;
    EXPECT_EQ(ReadResult::OK, c.read(1, 0x1000, 0, 0, nullptr, &err));
    EXPECT_EQ(0u, c.connections());
    char b;
    EXPECT_EQ(ReadResult::NOT_ALLOWED, c.read(1, 0x1000, 0, 1, &b, &err));
    EXPECT_EQ(0u, c.connections());
}

TEST(TcpBulk, WithdrawnOrNeverOfferedIsCancelled) {
    std::unique_ptr<Server> s = start_server();
    ASSERT_TRUE(s);
    const size_t n = 2 * Client::kMinPart;  // 2 parts
    std::vector<uint8_t> src = pattern(n, 3), dst(n);
    Client c(s->address(), true, 2, kIo);
    int err = 0;
    EXPECT_EQ(ReadResult::CANCELLED, c.read(9, addr_of(src.data()), 0, n, dst.data(), &err));
    s->offer(9, src.data(), n);
    s->withdraw(9);
    s->withdraw(9);  // twice: no harm
    EXPECT_EQ(ReadResult::CANCELLED, c.read(9, addr_of(src.data()), 0, n, dst.data(), &err));
    // A part answered in full went back to the pool; one the read stopped
    // waiting for (its answer not read) was closed.
    EXPECT_GE(c.connections(), 1u);
    EXPECT_LE(c.connections(), 2u);
    s->offer(9, src.data(), n);
    ASSERT_EQ(ReadResult::OK, c.read(9, addr_of(src.data()), 0, n, dst.data(), &err));
    EXPECT_TRUE(dst == src);
    EXPECT_EQ(2u, c.connections());
}

TEST(TcpBulk, RangeOutsideTheOfferIsRefused) {
    std::unique_ptr<Server> s = start_server();
    ASSERT_TRUE(s);
    const size_t n = 1 << 20;
    std::vector<uint8_t> src = pattern(n, 4), dst(n + 4096);
    s->offer(3, src.data(), n);
    Client c(s->address(), true, 2, kIo);
    const uint64_t a = addr_of(src.data());
    const struct { uint64_t addr, off, len; } bad[] = {
        {a + 1, 0, 100},            // not the offer's start
        {a - 64, 64, 100},          // same bytes, other start
        {a, n - 10, 11},            // past the end
        {a, n + 1, 1},              // starts past the end
        {a, 2, ~uint64_t(0) - 1},   // off + len wraps
    };
    for (const auto &b : bad) {
        // Refused at the header: nothing is written into dst, however long.
        int err = 0;
        EXPECT_EQ(ReadResult::FAILED, c.read(3, b.addr, b.off, b.len, dst.data(), &err))
            << b.off << "+" << b.len;
        EXPECT_EQ(EINVAL, err);
    }
    // The connection is answered in full each time: still usable.
    int err = 0;
    ASSERT_EQ(ReadResult::OK, c.read(3, a, 0, n, dst.data(), &err));
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()));
    EXPECT_LE(c.connections(), 2u);
}

TEST(TcpBulk, ReplacedOfferServesOnlyTheNewBuffer) {
    std::unique_ptr<Server> s = start_server();
    ASSERT_TRUE(s);
    const size_t n = 256 << 10;
    std::vector<uint8_t> first = pattern(n, 5), second = pattern(n, 6), dst(n);
    s->offer(4, first.data(), n);
    s->offer(4, second.data(), n);  // the same seq again: replaces
    Client c(s->address(), true, 2, kIo);
    int err = 0;
    EXPECT_EQ(ReadResult::FAILED, c.read(4, addr_of(first.data()), 0, n, dst.data(), &err));
    ASSERT_EQ(ReadResult::OK, c.read(4, addr_of(second.data()), 0, n, dst.data(), &err));
    EXPECT_TRUE(dst == second);
}

namespace {
Server *g_hook_server = nullptr;
std::atomic<uint32_t> g_hook_seq{0};
std::atomic<int> g_hook_calls{0};
void withdraw_hook(uint32_t seq) {
    if (seq == g_hook_seq.load() && g_hook_calls.fetch_add(1) == 0) {
        g_hook_server->withdraw(seq);
    }
}
}  // namespace

TEST(TcpBulk, WithdrawDuringAPartIsCancelledAndLeavesNoStaleBytes) {
    std::unique_ptr<Server> s = start_server();
    ASSERT_TRUE(s);
    g_hook_server = s.get();
    Hook hook(withdraw_hook);
    const size_t n = 8 << 20;
    std::vector<uint8_t> src = pattern(n, 7);
    Client c(s->address(), true, 4, kIo);
    for (uint32_t round = 0; round < 4; ++round) {
        // The header said OK (the offer stood), the offer goes between the
        // header and the payload: the trailer must say WITHDRAWN.
        const uint32_t seq = 100 + round;
        g_hook_calls = 0;
        g_hook_seq = seq;
        s->offer(seq, src.data(), n);
        std::vector<uint8_t> dst(n);
        int err = 0;
        EXPECT_EQ(ReadResult::CANCELLED, c.read(seq, addr_of(src.data()), 0, n, dst.data(), &err));
        EXPECT_GE(g_hook_calls.load(), 1);
        // Connections left mid-answer were closed, not pooled: the next
        // read sees only its own bytes.
        g_hook_seq = 0;
        s->offer(seq + 1000, src.data(), n);
        ASSERT_EQ(ReadResult::OK,
                  c.read(seq + 1000, addr_of(src.data()), 0, n, dst.data(), &err))
            << std::strerror(err);
        EXPECT_TRUE(dst == src);
        EXPECT_LE(c.connections(), 4u);
    }
    g_hook_server = nullptr;
}

TEST(TcpBulk, WithdrawWhileTheServerIsBlockedWritingSendsAWithdrawnTrailer) {
    const uint64_t n = unbufferable_bytes();
    if (n == 0 || n > (512ull << 20)) GTEST_SKIP() << "tcp_wmem unknown or huge";
    std::unique_ptr<Server> s = start_server();
    ASSERT_TRUE(s);
    std::vector<uint8_t> src = pattern(n, 8);
    s->offer(5, src.data(), n);
    Raw r(s->address().port, 64 << 10);
    ASSERT_EQ(0, r.hello(s->address().token));
    ASSERT_TRUE(r.request(5, addr_of(src.data()), 0, n));
    wire::Header h{};
    ASSERT_TRUE(r.get(&h));
    EXPECT_EQ(wire::kHeaderMagic, h.magic);
    ASSERT_EQ(wire::kOk, h.status);
    ASSERT_EQ(n, h.len);
    std::vector<uint8_t> got(4096);
    ASSERT_EQ(tcp::Io::OK, r.get(got.data(), got.size()));
    EXPECT_TRUE(std::equal(got.begin(), got.end(), src.begin()));
    // The server wrote at most its send buffer and our window: it is still
    // writing this part when the offer goes.
    s->withdraw(5);
    std::vector<uint8_t> rest(n - got.size());
    ASSERT_EQ(tcp::Io::OK, r.get(rest.data(), rest.size()));
    wire::Trailer t{};
    ASSERT_TRUE(r.get(&t));
    EXPECT_EQ(wire::kTrailerMagic, t.magic);
    EXPECT_EQ(wire::kWithdrawn, t.status);
    // Once it noticed (within a chunk), it stopped reading the buffer: the
    // last MiB is zeros, not the pattern.
    EXPECT_TRUE(std::all_of(rest.end() - (1 << 20), rest.end(), [](uint8_t b) { return b == 0; }));
}

namespace {
/** 1 MiB and 3 pages readable, then an unreadable page: a buffer whose
 *  end is gone, and a part that meets the hole mid-send. */
struct HoledBuffer {
    size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    size_t readable = (size_t(1) << 20) + 3 * page;
    size_t n = readable + page;
    uint8_t *p = nullptr;
    HoledBuffer() {
        void *m = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        EXPECT_NE(MAP_FAILED, m);
        if (m == MAP_FAILED) return;
        p = static_cast<uint8_t *>(m);
        std::vector<uint8_t> v = pattern(n, 9);
        std::memcpy(p, v.data(), n);
        EXPECT_EQ(0, ::mprotect(p + readable, page, PROT_NONE));
    }
    ~HoledBuffer() {
        if (p) ::munmap(p, n);
    }
};
}  // namespace

TEST(TcpBulk, UnreadableTailSendsZerosAndAWithdrawnTrailerOnAUsableConnection) {
    std::unique_ptr<Server> s = start_server();
    ASSERT_TRUE(s);
    HoledBuffer b;
    ASSERT_TRUE(b.p);
    s->offer(6, b.p, b.n);
    Raw r(s->address().port);
    ASSERT_EQ(0, r.hello(s->address().token));
    ASSERT_TRUE(r.request(6, addr_of(b.p), 0, b.n));
    wire::Header h{};
    ASSERT_TRUE(r.get(&h));
    ASSERT_EQ(wire::kOk, h.status);
    ASSERT_EQ(b.n, h.len);
    std::vector<uint8_t> got(b.n);
    ASSERT_EQ(tcp::Io::OK, r.get(got.data(), got.size()));
    // The offered bytes up to where the kernel met the hole (it copies in
    // chunks: a chunk that reaches it is lost whole), zeros from there on.
    const size_t k = static_cast<size_t>(
        std::mismatch(got.begin(), got.begin() + b.readable, b.p).first - got.begin());
    EXPECT_GT(k, 0u);
    EXPECT_TRUE(std::all_of(got.begin() + k, got.end(), [](uint8_t x) { return x == 0; }));
    wire::Trailer t{};
    ASSERT_TRUE(r.get(&t));
    EXPECT_EQ(wire::kTrailerMagic, t.magic);
    EXPECT_EQ(wire::kWithdrawn, t.status);
    // The stream kept its framing: the same connection serves the next request.
    ASSERT_TRUE(r.request(6, addr_of(b.p), b.page, b.readable - b.page));
    ASSERT_TRUE(r.get(&h));
    ASSERT_EQ(wire::kOk, h.status);
    ASSERT_EQ(tcp::Io::OK, r.get(got.data(), b.readable - b.page));
    EXPECT_EQ(0, std::memcmp(got.data(), b.p + b.page, b.readable - b.page));
    ASSERT_TRUE(r.get(&t));
    EXPECT_EQ(wire::kOk, t.status);
}

TEST(TcpBulk, UnreadableTailIsCancelledForAClient) {
    std::unique_ptr<Server> s = start_server();
    ASSERT_TRUE(s);
    HoledBuffer b;
    ASSERT_TRUE(b.p);
    s->offer(6, b.p, b.n);
    Client c(s->address(), true, 2, kIo);
    std::vector<uint8_t> dst(b.n);
    int err = 0;
    EXPECT_EQ(ReadResult::CANCELLED, c.read(6, addr_of(b.p), 0, b.n, dst.data(), &err));
    EXPECT_GE(c.connections(), 1u);  // the part that met the hole: answered in full
    EXPECT_LE(c.connections(), 2u);
    ASSERT_EQ(ReadResult::OK, c.read(6, addr_of(b.p), 0, b.readable, dst.data(), &err));
    EXPECT_EQ(0, std::memcmp(dst.data(), b.p, b.readable));
    EXPECT_LE(c.connections(), 2u);
}

TEST(TcpBulk, ConcurrentReadsOfOneClient) {
    std::unique_ptr<Server> s = start_server();
    ASSERT_TRUE(s);
    Client c(s->address(), true, 2, kIo);
    std::vector<std::vector<uint8_t>> src;
    for (uint32_t i = 0; i < 4; ++i) {
        src.push_back(pattern((2 << 20) + i * 4097, 20 + i));
        s->offer(i + 1, src[i].data(), src[i].size());
    }
    std::atomic<int> bad{0};
    std::vector<std::thread> readers;
    for (uint32_t i = 0; i < 4; ++i) {
        readers.emplace_back([&, i] {
            for (int round = 0; round < 8; ++round) {
                std::vector<uint8_t> dst(src[i].size());
                int err = 0;
                if (c.read(i + 1, addr_of(src[i].data()), 0, dst.size(), dst.data(), &err) !=
                        ReadResult::OK ||
                    dst != src[i]) {
                    bad.fetch_add(1);
                }
            }
        });
    }
    for (std::thread &t : readers) t.join();
    EXPECT_EQ(0, bad.load());
    // Concurrent reads used different connections, all pooled again.
    EXPECT_GE(c.connections(), 2u);
    EXPECT_LE(c.connections(), 8u);
}

TEST(TcpBulk, ConnectionsOfAGoneClientEndOnTheServer) {
    std::unique_ptr<Server> s = start_server();
    ASSERT_TRUE(s);
    const size_t n = 4 * Client::kMinPart;
    std::vector<uint8_t> src = pattern(n, 13), dst(n);
    s->offer(1, src.data(), n);
    {
        Client c(s->address(), true, 4, kIo);
        int err = 0;
        ASSERT_EQ(ReadResult::OK, c.read(1, addr_of(src.data()), 0, n, dst.data(), &err));
        EXPECT_EQ(4u, s->connections());
    }
    EXPECT_TRUE(wait_until([&] { return s->connections() == 0; }));
    Client again(s->address(), true, 4, kIo);
    int err = 0;
    ASSERT_EQ(ReadResult::OK, again.read(1, addr_of(src.data()), 0, n, dst.data(), &err));
    EXPECT_TRUE(dst == src);
}

TEST(TcpBulk, PublishedAddressesServeAClientOfAnotherHost) {
    std::unique_ptr<Server> s = start_server();
    ASSERT_TRUE(s);
    if (s->address().naddr == 0) GTEST_SKIP() << "no interface but loopback";
    const size_t n = 1 << 20;
    std::vector<uint8_t> src = pattern(n, 14), dst(n);
    s->offer(1, src.data(), n);
    Client c(s->address(), false, 2, kIo);  // not 127.0.0.1: the published ones
    int err = 0;
    ASSERT_EQ(ReadResult::OK, c.read(1, addr_of(src.data()), 0, n, dst.data(), &err))
        << std::strerror(err);
    EXPECT_TRUE(dst == src);
}

// A read asked for ahead (Client::prefetch) takes its own connections and
// hands them to its read(); a read of another message meanwhile goes on
// its own; a second prefetch while one waits does nothing; a prefetched
// read of a withdrawn offer is CANCELLED; a prefetch that cannot connect
// leaves the read to fail alone.
TEST(TcpBulk, PrefetchedReadsTakeTheirAnswers) {
    std::unique_ptr<Server> s = start_server();
    ASSERT_TRUE(s);
    const size_t n = 2 * Client::kMinPart;  // 2 parts
    std::vector<uint8_t> a = pattern(n, 11), b = pattern(n, 12), c = pattern(n, 13);
    s->offer(1, a.data(), n);
    s->offer(2, b.data(), n);
    s->offer(3, c.data(), n);
    Client cl(s->address(), true, 2, kIo);
    int err = 0;
    cl.prefetch(2, addr_of(b.data()), 0, n);
    EXPECT_EQ(2u, cl.connections());
    cl.prefetch(3, addr_of(c.data()), 0, n);  // one ahead at most
    EXPECT_EQ(2u, cl.connections());
    std::vector<uint8_t> dst(n, 0);
    ASSERT_EQ(ReadResult::OK, cl.read(1, addr_of(a.data()), 0, n, dst.data(), &err))
        << std::strerror(err);
    EXPECT_TRUE(dst == a);
    EXPECT_EQ(4u, cl.connections());  // the prefetch's two and the read's two
    std::fill(dst.begin(), dst.end(), 0);
    ASSERT_EQ(ReadResult::OK, cl.read(2, addr_of(b.data()), 0, n, dst.data(), &err))
        << std::strerror(err);
    EXPECT_TRUE(dst == b);
    std::fill(dst.begin(), dst.end(), 0);
    ASSERT_EQ(ReadResult::OK, cl.read(3, addr_of(c.data()), 0, n, dst.data(), &err));
    EXPECT_TRUE(dst == c);
    EXPECT_EQ(4u, cl.connections());  // all pooled again, none more made

    s->withdraw(1);  // (a withdraw after its bytes left gives OK: they were the offer's)
    cl.prefetch(1, addr_of(a.data()), 0, n);
    EXPECT_EQ(ReadResult::CANCELLED, cl.read(1, addr_of(a.data()), 0, n, dst.data(), &err));
    ASSERT_EQ(ReadResult::OK, cl.read(2, addr_of(b.data()), 0, n, dst.data(), &err));
    EXPECT_TRUE(dst == b);

    Address nobody = s->address();
    s.reset();  // its connections end, its port is closed
    Client gone(nobody, true, 2, 2000);
    gone.prefetch(2, addr_of(b.data()), 0, n);
    EXPECT_EQ(0u, gone.connections());
    EXPECT_EQ(ReadResult::NOT_ALLOWED, gone.read(2, addr_of(b.data()), 0, n, dst.data(), &err));
}

// The addresses a Server publishes are those of the interfaces named in
// its devices (UCX_NET_DEVICES), when some are named.
TEST(TcpBulkServer, PublishesTheNamedDevicesOnly) {
    int err = 0;
    std::unique_ptr<Server> all = Server::start(kIo, &err);
    ASSERT_TRUE(all) << std::strerror(err);
    std::unique_ptr<Server> none = Server::start(kIo, &err, "lo,no_such_dev0");
    ASSERT_TRUE(none) << std::strerror(err);
    EXPECT_EQ(0u, none->address().naddr);  // lo is never published
    if (all->address().naddr == 0) GTEST_SKIP() << "no interface but loopback";
    // The interface of the first published address, named alone.
    std::string name;
    ifaddrs *list = nullptr;
    ASSERT_EQ(0, getifaddrs(&list));
    for (ifaddrs *i = list; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET &&
            reinterpret_cast<const sockaddr_in *>(i->ifa_addr)->sin_addr.s_addr ==
                all->address().ipv4[0]) {
            name = i->ifa_name;
            break;
        }
    }
    freeifaddrs(list);
    ASSERT_FALSE(name.empty());
    std::unique_ptr<Server> one = Server::start(kIo, &err, "no_such_dev0," + name);
    ASSERT_TRUE(one);
    ASSERT_EQ(1u, one->address().naddr);
    EXPECT_EQ(all->address().ipv4[0], one->address().ipv4[0]);
}
