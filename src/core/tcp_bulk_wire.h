/*
 * The wire of core/tcp_bulk.h: the fixed-size messages a Client and a
 * Server exchange (host byte order, little-endian: both ends run this
 * library on the same kind of host), their magics and statuses. Internal
 * to tcp_bulk_server.cc, tcp_bulk_client.cc and their tests.
 */
#ifndef UCXP2P_CORE_TCP_BULK_WIRE_H
#define UCXP2P_CORE_TCP_BULK_WIRE_H

#include "core/tcp_bulk.h"

#include <atomic>
#include <cstdint>
#include <string>

namespace ucxp2p {
namespace tcpb {
namespace wire {

// One magic per message, so a stream that lost its framing is caught at
// the next message instead of being read as lengths.
constexpr uint32_t kHelloMagic = 0x4f4c4548u;    // "HELO"
constexpr uint32_t kHelloOkMagic = 0x4b4f4c48u;  // "HLOK"
constexpr uint32_t kRequestMagic = 0x51455242u;  // "BREQ"
constexpr uint32_t kHeaderMagic = 0x52444842u;   // "BHDR"
constexpr uint32_t kTrailerMagic = 0x4c525442u;  // "BTRL"
// 2: the header carries pad (kMaxPad).
constexpr uint32_t kVersion = 2;

enum Status : uint32_t {
    kOk = 0,
    kRefused = 1,     // HEADER: the range is not inside the offer
    kWithdrawn = 2,   // HEADER: no offer; TRAILER: withdrawn while written
    kBadToken = 3,    // HELLO_OK
    kBadVersion = 4,  // HELLO_OK
    kUnavailable = 5, // HEADER: the Server lost offers (no memory): fall back
};

struct Hello {
    uint32_t magic;
    uint32_t version;
    uint64_t token;
};
struct HelloOk {
    uint32_t magic;
    uint32_t status;
};
struct Request {
    uint32_t magic;
    uint32_t seq;
    uint64_t addr;  // the offered buffer's start in the sender
    uint64_t off;   // of the part, from addr
    uint64_t len;
};
struct Header {
    uint32_t magic;
    uint32_t status;
    uint64_t len;       // payload bytes that follow (0 unless kOk)
    uint32_t pad;       // zero bytes between this header and the payload
    uint32_t reserved;  // 0
};

/** pad is below this: a page.
 *
 *  Why pad: the kernel copies a send into the sending thread's page
 *  fragment, which starts over at offset 0 of its page once nothing sent
 *  from that page is queued any more (the reader took it all and its
 *  acknowledgement came back) -- here at nearly every header, one part
 *  being asked for at a time on a connection. Unpadded, a payload would land
 *  sizeof(Header) bytes past its source's page offset, and on this
 *  machine's AMD EPYC a copy whose destination sits within a few bytes of
 *  its source's page offset (either side) took 1.6-2x the CPU: a
 *  page-aligned buffer sent at about half the rate of one at offset 2048
 *  (docs/PERFORMANCE.md, 2026-11-29 22:30). */
constexpr uint32_t kMaxPad = 4096;
/** Where the server puts a payload: this many bytes past its source's
 *  page offset (one cache line; 32-512 measured alike, 0 and 16 slow). */
constexpr uint32_t kPayloadSkew = 64;

/** The pad before a payload whose first byte is at src in the sender. */
constexpr uint32_t payload_pad(uint64_t src) {
    return static_cast<uint32_t>((src + kPayloadSkew - sizeof(Header)) & (kMaxPad - 1));
}

struct Trailer {
    uint32_t magic;
    uint32_t status;
};
static_assert(sizeof(Hello) == 16 && sizeof(HelloOk) == 8 && sizeof(Request) == 32 &&
              sizeof(Header) == 24 && sizeof(Trailer) == 8,
              "wire sizes");

/** A Server's token: random, never 0 (tcp_bulk_host.cc). */
uint64_t random_token();

/** Set a->ipv4 / a->naddr: up to 4 IPv4 addresses of interfaces that are
 *  up and not loopback, among those devices names (a UCX_NET_DEVICES
 *  value; empty or "all": any), in the host's interface order. */
void local_addresses(Address *a, const std::string &devices);

/** Tests only: called by a Server's connection thread after it sent an OK
 *  header and before the first payload byte (no lock held), with the
 *  request's seq. nullptr (always, outside tests): nothing. */
extern std::atomic<void (*)(uint32_t seq)> g_test_before_payload;

}  // namespace wire
}  // namespace tcpb
}  // namespace ucxp2p

#endif
