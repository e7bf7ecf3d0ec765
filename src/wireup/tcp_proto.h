/*
 * Wire format of the TCP bootstrap (all integers big-endian).
 *
 * Every frame: 16-byte header {u32 magic "P2PB", u16 version, u16 type,
 * u64 payload length}, then the payload:
 *   HELLO    rank->root   u32 rank, u32 world size, u16+token, u16+hostname
 *   WELCOME  root->rank   u32 world size (hello accepted)
 *   REJECT   root->rank   reason text (hello refused; root then closes)
 *   DATA     rank->root   u64 collective sequence, blob
 *   ALL      root->rank   u64 sequence, per rank {u64 length, bytes};
 *                         sequence 0 is the rendezvous roster (host names)
 *   ABORT    both ways    i32 p2p_status_t, reason text
 */
#ifndef UCXP2P_WIREUP_TCP_PROTO_H
#define UCXP2P_WIREUP_TCP_PROTO_H

#include "wireup/tcp_socket.h"

#include <ucxp2p/p2p.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ucxp2p {
namespace tcp {

constexpr uint32_t kMagic = 0x50325042;  // "P2PB"
constexpr uint16_t kVersion = 1;
constexpr size_t kHeaderSize = 16;
/** Largest HELLO/WELCOME/REJECT/ABORT payload accepted. */
constexpr uint64_t kMaxControl = 4096;
constexpr size_t kMaxHostname = 255;
constexpr size_t kMaxToken = 1024;

enum class Msg : uint16_t {
    HELLO = 1,
    WELCOME = 2,
    REJECT = 3,
    DATA = 4,
    ALL = 5,
    ABORT = 6
};

struct Header {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint64_t len;
};

void header_encode(Msg type, uint64_t len, uint8_t out[kHeaderSize]);
Header header_decode(const uint8_t in[kHeaderSize]);

/** Header + payload in one buffer. */
std::vector<uint8_t> frame_encode(Msg type, const std::vector<uint8_t> &payload);

struct Hello {
    uint32_t rank = 0;
    uint32_t size = 0;
    std::string token;
    std::string host;
};

std::vector<uint8_t> hello_encode(const Hello &h);
bool hello_decode(const uint8_t *p, size_t len, Hello *out);

std::vector<uint8_t> u32_encode(uint32_t v);
std::vector<uint8_t> u64_encode(uint64_t v);
/** p must hold 8 bytes. */
uint64_t u64_decode(const uint8_t *p);
bool u32_decode(const uint8_t *p, size_t len, uint32_t *out);

/** ALL payload (sequence + blobs). */
std::vector<uint8_t> all_encode(uint64_t seq,
                                const std::vector<std::vector<uint8_t>> &blobs);
bool all_decode(const uint8_t *p, size_t len, uint32_t nranks, uint64_t *seq,
                std::vector<std::vector<uint8_t>> *blobs);

std::vector<uint8_t> abort_encode(p2p_status_t st, const std::string &reason);
/** Decodes; a status other than TIMEOUT becomes P2P_ERR_BOOTSTRAP. */
void abort_decode(const uint8_t *p, size_t len, p2p_status_t *st,
                  std::string *reason);

/** Byte comparison whose time does not depend on where they differ. */
bool tokens_equal(const std::string &a, const std::string &b);

enum class FrameResult {
    OK,
    TIMEOUT,
    CLOSED,
    ERROR,
    BAD_MAGIC,
    BAD_VERSION,
    TOO_BIG
};

/** Read one whole frame; payloads above max_len are refused (TOO_BIG, the
 *  stream is then unusable). *hdr is filled whenever the header arrived. */
FrameResult frame_read(int fd, const Deadline &dl, uint64_t max_len,
                       Header *hdr, std::vector<uint8_t> *payload, int *err);

const char *frame_result_string(FrameResult r);

/** Send header + payload (payload may be empty). */
Io frame_send(int fd, Msg type, const uint8_t *prefix, size_t prefix_len,
              const uint8_t *body, size_t body_len, const Deadline &dl,
              bool stop_if_readable, int *err);

/** Best effort: send an ABORT frame within ms (never blocks longer). */
void abort_send(int fd, p2p_status_t st, const std::string &reason,
                uint64_t ms);

} // namespace tcp
} // namespace ucxp2p

#endif
