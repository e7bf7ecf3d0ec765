#include "wireup/tcp_proto.h"

#include <cstring>
#include <utility>

namespace ucxp2p {
namespace tcp {

namespace {

void put(std::vector<uint8_t> *v, uint64_t x, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) {
        v->push_back(static_cast<uint8_t>(x >> (8 * i)));
    }
}

uint64_t get(const uint8_t *p, int bytes) {
    uint64_t x = 0;
    for (int i = 0; i < bytes; ++i) {
        x = (x << 8) | p[i];
    }
    return x;
}

/** Bounds-checked reader over a payload. */
class Reader {
public:
    Reader(const uint8_t *p, size_t len) : p_(p), left_(len) {}
    bool num(int bytes, uint64_t *out) {
        if (left_ < static_cast<size_t>(bytes)) {
            return false;
        }
        *out = get(p_, bytes);
        p_ += bytes;
        left_ -= bytes;
        return true;
    }
    bool bytes(uint64_t n, const uint8_t **out) {
        if (left_ < n) {
            return false;
        }
        *out = p_;
        p_ += n;
        left_ -= n;
        return true;
    }
    bool str16(size_t max, std::string *out) {
        uint64_t n;
        const uint8_t *b;
        if (!num(2, &n) || n > max || !bytes(n, &b)) {
            return false;
        }
        out->assign(reinterpret_cast<const char *>(b), n);
        return true;
    }
    size_t left() const { return left_; }

private:
    const uint8_t *p_;
    size_t left_;
};

void put_str16(std::vector<uint8_t> *v, const std::string &s) {
    put(v, s.size(), 2);
    v->insert(v->end(), s.begin(), s.end());
}

} // namespace

void header_encode(Msg type, uint64_t len, uint8_t out[kHeaderSize]) {
    std::vector<uint8_t> v;
    v.reserve(kHeaderSize);
    put(&v, kMagic, 4);
    put(&v, kVersion, 2);
    put(&v, static_cast<uint16_t>(type), 2);
    put(&v, len, 8);
    std::memcpy(out, v.data(), kHeaderSize);
}

Header header_decode(const uint8_t in[kHeaderSize]) {
    Header h;
    h.magic = static_cast<uint32_t>(get(in, 4));
    h.version = static_cast<uint16_t>(get(in + 4, 2));
    h.type = static_cast<uint16_t>(get(in + 6, 2));
    h.len = get(in + 8, 8);
    return h;
}

std::vector<uint8_t> frame_encode(Msg type, const std::vector<uint8_t> &payload) {
    std::vector<uint8_t> f(kHeaderSize);
    header_encode(type, payload.size(), f.data());
    f.insert(f.end(), payload.begin(), payload.end());
    return f;
}

std::vector<uint8_t> hello_encode(const Hello &h) {
    std::vector<uint8_t> v;
    put(&v, h.rank, 4);
    put(&v, h.size, 4);
    put_str16(&v, h.token);
    put_str16(&v, h.host);
    return v;
}

bool hello_decode(const uint8_t *p, size_t len, Hello *out) {
    Reader r(p, len);
    uint64_t rank, size;
    Hello h;
    if (!r.num(4, &rank) || !r.num(4, &size) || !r.str16(kMaxToken, &h.token) ||
        !r.str16(kMaxHostname, &h.host) || r.left() != 0 || h.host.empty()) {
        return false;
    }
    h.rank = static_cast<uint32_t>(rank);
    h.size = static_cast<uint32_t>(size);
    *out = std::move(h);
    return true;
}

std::vector<uint8_t> u32_encode(uint32_t x) {
    std::vector<uint8_t> v;
    put(&v, x, 4);
    return v;
}

std::vector<uint8_t> u64_encode(uint64_t x) {
    std::vector<uint8_t> v;
    put(&v, x, 8);
    return v;
}

uint64_t u64_decode(const uint8_t *p) { return get(p, 8); }

bool u32_decode(const uint8_t *p, size_t len, uint32_t *out) {
    if (len != 4) {
        return false;
    }
    *out = static_cast<uint32_t>(get(p, 4));
    return true;
}

std::vector<uint8_t> all_encode(uint64_t seq,
                                const std::vector<std::vector<uint8_t>> &blobs) {
    size_t total = 8;
    for (const auto &b : blobs) {
        total += 8 + b.size();
    }
    std::vector<uint8_t> v;
    v.reserve(total);
    put(&v, seq, 8);
    for (const auto &b : blobs) {
        put(&v, b.size(), 8);
        v.insert(v.end(), b.begin(), b.end());
    }
    return v;
}

bool all_decode(const uint8_t *p, size_t len, uint32_t nranks, uint64_t *seq,
                std::vector<std::vector<uint8_t>> *blobs) {
    Reader r(p, len);
    if (!r.num(8, seq)) {
        return false;
    }
    std::vector<std::vector<uint8_t>> out(nranks);
    for (uint32_t i = 0; i < nranks; ++i) {
        uint64_t n;
        const uint8_t *b;
        if (!r.num(8, &n) || !r.bytes(n, &b)) {
            return false;
        }
        out[i].assign(b, b + n);
    }
    if (r.left() != 0) {
        return false;
    }
    blobs->swap(out);
    return true;
}

std::vector<uint8_t> abort_encode(p2p_status_t st, const std::string &reason) {
    std::vector<uint8_t> v;
    put(&v, static_cast<uint32_t>(static_cast<int32_t>(st)), 4);
    std::string r = reason.substr(0, kMaxControl - 4);
    v.insert(v.end(), r.begin(), r.end());
    return v;
}

void abort_decode(const uint8_t *p, size_t len, p2p_status_t *st,
                  std::string *reason) {
    *st = P2P_ERR_BOOTSTRAP;
    reason->clear();
    if (len < 4) {
        return;
    }
    int32_t s = static_cast<int32_t>(static_cast<uint32_t>(get(p, 4)));
    if (s == P2P_ERR_TIMEOUT) {
        *st = P2P_ERR_TIMEOUT;
    }
    reason->assign(reinterpret_cast<const char *>(p + 4), len - 4);
}

bool tokens_equal(const std::string &a, const std::string &b) {
    unsigned diff = (a.size() != b.size()) ? 1u : 0u;
    size_t n = a.size() < b.size() ? a.size() : b.size();
    for (size_t i = 0; i < n; ++i) {
        diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
    }
    return diff == 0;
}

const char *frame_result_string(FrameResult r) {
    switch (r) {
    case FrameResult::OK:          return "ok";
    case FrameResult::TIMEOUT:     return "timed out";
    case FrameResult::CLOSED:      return "connection closed by peer";
    case FrameResult::ERROR:       return "socket error";
    case FrameResult::BAD_MAGIC:   return "not a ucxp2p bootstrap frame (bad magic)";
    case FrameResult::BAD_VERSION: return "bootstrap protocol version mismatch";
    case FrameResult::TOO_BIG:     return "frame larger than allowed";
    }
    return "?";
}

FrameResult frame_read(int fd, const Deadline &dl, uint64_t max_len,
                       Header *hdr, std::vector<uint8_t> *payload, int *err) {
    auto conv = [](Io io) {
        switch (io) {
        case Io::TIMEOUT: return FrameResult::TIMEOUT;
        case Io::CLOSED:  return FrameResult::CLOSED;
        default:          return FrameResult::ERROR;
        }
    };
    uint8_t raw[kHeaderSize];
    Io io = recv_all(fd, raw, sizeof(raw), dl, err);
    if (io != Io::OK) {
        return conv(io);
    }
    *hdr = header_decode(raw);
    if (hdr->magic != kMagic) {
        return FrameResult::BAD_MAGIC;
    }
    if (hdr->version != kVersion) {
        return FrameResult::BAD_VERSION;
    }
    if (hdr->len > max_len) {
        return FrameResult::TOO_BIG;
    }
    payload->resize(hdr->len);
    io = recv_all(fd, payload->data(), payload->size(), dl, err);
    return io == Io::OK ? FrameResult::OK : conv(io);
}

Io frame_send(int fd, Msg type, const uint8_t *prefix, size_t prefix_len,
              const uint8_t *body, size_t body_len, const Deadline &dl,
              bool stop_if_readable, int *err) {
    // Header and a small prefix go out in one send; the body follows unsplit.
    std::vector<uint8_t> head(kHeaderSize);
    header_encode(type, prefix_len + body_len, head.data());
    head.insert(head.end(), prefix, prefix + prefix_len);
    Io io = send_all(fd, head.data(), head.size(), dl, stop_if_readable, err);
    if (io != Io::OK || body_len == 0) {
        return io;
    }
    return send_all(fd, body, body_len, dl, stop_if_readable, err);
}

void abort_send(int fd, p2p_status_t st, const std::string &reason,
                uint64_t ms) {
    if (fd < 0) {
        return;
    }
    std::vector<uint8_t> f = frame_encode(Msg::ABORT, abort_encode(st, reason));
    int err = 0;
    (void)send_all(fd, f.data(), f.size(), Deadline(ms), false, &err);
}

} // namespace tcp
} // namespace ucxp2p
