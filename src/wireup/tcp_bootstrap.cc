/*
 * TCP/env bootstrap: star through rank 0 (see tcp_rendezvous.h for joining,
 * tcp_proto.h for the frames). allgather = every rank sends its blob to
 * rank 0, which sends all blobs back; barrier = allgather of empty blobs.
 * Any failure (a rank leaves, aborts, times out, breaks the protocol) is
 * forwarded by rank 0 to everybody and makes the object unusable: its later
 * collectives return P2P_ERR_BOOTSTRAP at once.
 *
 * Thread safety: calls on one object must come from one thread at a time
 * (the caller serialises them); different objects are independent.
 */
#include "wireup/bootstrap.h"

#include "core/log.h"
#include "wireup/tcp_env.h"
#include "wireup/tcp_proto.h"
#include "wireup/tcp_rendezvous.h"

#include <poll.h>

#include <chrono>
#include <exception>
#include <new>

namespace ucxp2p {

using namespace tcp;

namespace {

constexpr uint64_t kAbortSendMs = 500;

class TcpBootstrap final : public Bootstrap {
public:
    TcpBootstrap(TcpConfig cfg, TcpRendezvous rv);
    ~TcpBootstrap() override = default;  // Fd members close the connections

    uint32_t rank() const override { return cfg_.rank; }
    uint32_t size() const override { return cfg_.size; }
    uint32_t local_rank() const override { return local_rank_; }
    uint32_t local_size() const override { return local_size_; }
    const char *name() const override { return "tcp"; }

    p2p_status_t allgather(const std::vector<uint8_t> &mine,
                           std::vector<std::vector<uint8_t>> *all_p) override;
    p2p_status_t barrier() override;
    void abort(const char *reason) override;

private:
    p2p_status_t root_allgather(const std::vector<uint8_t> &mine,
                                std::vector<std::vector<uint8_t>> *all_p);
    p2p_status_t client_allgather(const std::vector<uint8_t> &mine,
                                  std::vector<std::vector<uint8_t>> *all_p);
    /** Rank 0: tell every rank, mark failed, return st. */
    p2p_status_t root_fail(p2p_status_t st, const std::string &why);
    /** Rank 0, every blob of op in: fail the job if a rank gave up on it. */
    p2p_status_t root_check_gave_up(const std::string &op);
    /** Rank > 0: read the frame rank 0 sent instead of what we expected. */
    p2p_status_t client_read_abort(const Deadline &dl);
    uint64_t all_max() const {
        return 8 + uint64_t(cfg_.size) * (8 + cfg_.max_msg);
    }

    TcpConfig cfg_;
    TcpRendezvous rv_;
    uint32_t local_rank_ = 0;
    uint32_t local_size_ = 1;
    uint64_t seq_ = 0;
    bool failed_ = false;
};

TcpBootstrap::TcpBootstrap(TcpConfig cfg, TcpRendezvous rv)
    : cfg_(std::move(cfg)), rv_(std::move(rv)) {
    uint32_t lr = 0, ls = 0;
    for (uint32_t r = 0; r < cfg_.size; ++r) {
        if (rv_.hosts[r] == cfg_.host) {
            lr += (r < cfg_.rank) ? 1 : 0;
            ++ls;
        }
    }
    local_rank_ = cfg_.has_local_rank ? cfg_.local_rank : lr;
    local_size_ = cfg_.has_local_size ? cfg_.local_size : ls;
    if (local_rank_ >= local_size_) {
        // Only one of the pair was given: a pair that is no rank on its host
        // would be refused by p2p_context_create (p2p_config_t), on this
        // rank alone. Both computed ones agree with each other.
        P2P_LOG(P2P_LOG_WARN, "tcp bootstrap: rank %u: local rank %u is not "
                "below local size %u (%s given, the other computed from host "
                "names): using the computed local rank %u of %u instead",
                cfg_.rank, local_rank_, local_size_,
                cfg_.has_local_rank ? "LOCAL_RANK" : "LOCAL_WORLD_SIZE", lr, ls);
        local_rank_ = lr;
        local_size_ = ls;
    }
}

p2p_status_t TcpBootstrap::root_fail(p2p_status_t st, const std::string &why) {
    P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: %s", why.c_str());
    for (Fd &fd : rv_.peers) {
        abort_send(fd.get(), st, why, kAbortSendMs);
    }
    failed_ = true;
    return st;
}

p2p_status_t TcpBootstrap::client_read_abort(const Deadline &dl) {
    Header hdr;
    std::vector<uint8_t> payload;
    int err = 0;
    failed_ = true;
    FrameResult fr =
        frame_read(rv_.root.get(), dl.capped(kAbortSendMs), kMaxControl, &hdr,
                   &payload, &err);
    if (fr == FrameResult::OK && hdr.type == static_cast<uint16_t>(Msg::ABORT)) {
        p2p_status_t st;
        std::string why;
        abort_decode(payload.data(), payload.size(), &st, &why);
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: rank %u: job aborted: %s",
                cfg_.rank, why.c_str());
        return st;
    }
    P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: rank %u lost rank 0: %s", cfg_.rank,
            fr == FrameResult::OK ? "unexpected frame" : frame_result_string(fr));
    return P2P_ERR_BOOTSTRAP;
}

p2p_status_t TcpBootstrap::allgather(const std::vector<uint8_t> &mine,
                                     std::vector<std::vector<uint8_t>> *all_p) {
    if (all_p == nullptr) {
        return P2P_ERR_INVALID_PARAM;
    }
    if (failed_) {
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: rank %u is unusable after an "
                "earlier failure", cfg_.rank);
        return P2P_ERR_BOOTSTRAP;
    }
    if (mine.size() > cfg_.max_msg) {
        std::string why = "rank " + std::to_string(cfg_.rank) + " contributed " +
                          std::to_string(mine.size()) +
                          " bytes, above P2P_BOOTSTRAP_MAX_MSG=" +
                          std::to_string(cfg_.max_msg);
        if (cfg_.rank == 0) {
            root_fail(P2P_ERR_BOOTSTRAP, why);
        } else {
            P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: %s", why.c_str());
            abort_send(rv_.root.get(), P2P_ERR_BOOTSTRAP, why, kAbortSendMs);
            failed_ = true;
        }
        return P2P_ERR_INVALID_PARAM;
    }
    ++seq_;
    try {
        return cfg_.rank == 0 ? root_allgather(mine, all_p)
                              : client_allgather(mine, all_p);
    } catch (const std::bad_alloc &) {
        std::string why = "rank " + std::to_string(cfg_.rank) +
                          " ran out of memory in allgather";
        if (cfg_.rank == 0) {
            root_fail(P2P_ERR_BOOTSTRAP, why);
        } else {
            abort_send(rv_.root.get(), P2P_ERR_BOOTSTRAP, why, kAbortSendMs);
            failed_ = true;
        }
        return P2P_ERR_NO_MEMORY;
    } catch (const std::exception &e) {
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: rank %u: allgather: %s",
                cfg_.rank, e.what());
        failed_ = true;
        return P2P_ERR_BOOTSTRAP;
    }
}

p2p_status_t TcpBootstrap::root_check_gave_up(const std::string &op) {
    // Every rank sent its blob and now waits for the result, so nothing
    // else can follow it: whatever is readable is the abort of a rank that
    // gave up waiting (rank 0 came after its deadline), or its leaving.
    // Answering the others would split the job's outcome.
    std::vector<pollfd> pfds;
    for (uint32_t r = 1; r < cfg_.size; ++r) {
        pfds.push_back({rv_.peers[r].get(), POLLIN, 0});
    }
    int rc;
    do {
        rc = ::poll(pfds.data(), pfds.size(), 0);
    } while (rc < 0 && errno == EINTR);
    for (uint32_t i = 0; rc > 0 && i < pfds.size(); ++i) {
        if (pfds[i].revents == 0) {
            continue;
        }
        const std::string from = "rank " + std::to_string(i + 1);
        Header hdr;
        std::vector<uint8_t> payload;
        int err = 0;
        FrameResult fr = frame_read(pfds[i].fd, Deadline(kAbortSendMs), kMaxControl, &hdr,
                                    &payload, &err);
        if (fr == FrameResult::OK && hdr.type == static_cast<uint16_t>(Msg::ABORT)) {
            p2p_status_t st;
            std::string why;
            abort_decode(payload.data(), payload.size(), &st, &why);
            return root_fail(P2P_ERR_BOOTSTRAP, from + " aborted the job: " + why);
        }
        return root_fail(P2P_ERR_BOOTSTRAP, from + " left or broke the protocol in " + op +
                                                " (" + frame_result_string(fr) + ")");
    }
    return P2P_OK;
}

p2p_status_t TcpBootstrap::root_allgather(
    const std::vector<uint8_t> &mine, std::vector<std::vector<uint8_t>> *all_p) {
    Deadline dl(cfg_.timeout_ms);
    std::vector<std::vector<uint8_t>> blobs(cfg_.size);
    std::vector<bool> got(cfg_.size, false);
    blobs[0] = mine;
    got[0] = true;
    uint32_t ngot = 1;
    std::vector<pollfd> pfds;
    std::vector<uint32_t> who;
    const std::string op = "allgather " + std::to_string(seq_);
    while (ngot < cfg_.size) {
        pfds.clear();
        who.clear();
        for (uint32_t r = 1; r < cfg_.size; ++r) {
            if (!got[r]) {
                pfds.push_back({rv_.peers[r].get(), POLLIN, 0});
                who.push_back(r);
            }
        }
        int rc = ::poll(pfds.data(), pfds.size(), dl.poll_ms());
        if (rc < 0 && errno != EINTR) {
            return root_fail(P2P_ERR_BOOTSTRAP, "rank 0: poll failed in " + op);
        }
        if (rc <= 0 && dl.expired()) {
            return root_fail(P2P_ERR_TIMEOUT,
                             "rank 0 waited " + std::to_string(cfg_.timeout_ms) +
                                 " ms for " + (who.size() > 1 ? "ranks " : "rank ") +
                                 tcp_rank_list(who) + " in " + op);
        }
        for (size_t i = 0; i < pfds.size(); ++i) {
            if (pfds[i].revents == 0) {
                continue;
            }
            uint32_t r = who[i];
            Header hdr;
            std::vector<uint8_t> payload;
            int err = 0;
            FrameResult fr = frame_read(pfds[i].fd, dl, 8 + cfg_.max_msg, &hdr,
                                        &payload, &err);
            const std::string from = "rank " + std::to_string(r);
            if (fr == FrameResult::TOO_BIG) {
                return root_fail(P2P_ERR_BOOTSTRAP,
                                 from + " sent a " + std::to_string(hdr.len) +
                                     "-byte frame in " + op +
                                     ", above P2P_BOOTSTRAP_MAX_MSG=" +
                                     std::to_string(cfg_.max_msg) + " (+8)");
            }
            if (fr == FrameResult::TIMEOUT) {
                return root_fail(P2P_ERR_TIMEOUT,
                                 "rank 0 waited " +
                                     std::to_string(cfg_.timeout_ms) +
                                     " ms for the rest of " + from + "'s " + op +
                                     " frame");
            }
            if (fr == FrameResult::CLOSED || fr == FrameResult::ERROR) {
                return root_fail(P2P_ERR_BOOTSTRAP,
                                 from + " left during " + op + " (" +
                                     (fr == FrameResult::ERROR ? errno_string(err)
                                                               : frame_result_string(fr)) +
                                     ")");
            }
            if (fr != FrameResult::OK) {
                return root_fail(P2P_ERR_BOOTSTRAP, from + " broke the protocol in " +
                                                        op + ": " +
                                                        frame_result_string(fr));
            }
            if (hdr.type == static_cast<uint16_t>(Msg::ABORT)) {
                p2p_status_t st;
                std::string why;
                abort_decode(payload.data(), payload.size(), &st, &why);
                return root_fail(P2P_ERR_BOOTSTRAP,
                                 from + " aborted the job: " + why);
            }
            uint64_t seq = 0;
            if (hdr.type != static_cast<uint16_t>(Msg::DATA) ||
                payload.size() < 8 ||
                (seq = u64_decode(payload.data())) != seq_) {
                return root_fail(P2P_ERR_BOOTSTRAP,
                                 from + " is out of step in " + op +
                                     " (frame type " + std::to_string(hdr.type) +
                                     ", sequence " + std::to_string(seq) + ")");
            }
            blobs[r].assign(payload.begin() + 8, payload.end());
            got[r] = true;
            ++ngot;
        }
    }
    p2p_status_t st = root_check_gave_up(op);
    if (st != P2P_OK) {
        return st;
    }
    std::vector<uint8_t> f = frame_encode(Msg::ALL, all_encode(seq_, blobs));
    for (uint32_t r = 1; r < cfg_.size; ++r) {
        int err = 0;
        Io io = send_all(rv_.peers[r].get(), f.data(), f.size(), dl, false, &err);
        if (io != Io::OK) {
            return root_fail(io == Io::TIMEOUT ? P2P_ERR_TIMEOUT : P2P_ERR_BOOTSTRAP,
                             "rank 0 could not send the result of " + op +
                                 " to rank " + std::to_string(r) + ": " +
                                 io_string(io));
        }
    }
    all_p->swap(blobs);
    return P2P_OK;
}

p2p_status_t TcpBootstrap::client_allgather(
    const std::vector<uint8_t> &mine, std::vector<std::vector<uint8_t>> *all_p) {
    Deadline dl(cfg_.timeout_ms);
    int fd = rv_.root.get();
    std::vector<uint8_t> seq = u64_encode(seq_);
    int err = 0;
    Io io = frame_send(fd, Msg::DATA, seq.data(), seq.size(), mine.data(),
                       mine.size(), dl, true, &err);
    if (io == Io::READABLE) {
        return client_read_abort(dl);
    }
    if (io == Io::TIMEOUT) {
        failed_ = true;
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: rank %u waited %llu ms to send "
                "its allgather %llu blob to rank 0", cfg_.rank,
                static_cast<unsigned long long>(cfg_.timeout_ms),
                static_cast<unsigned long long>(seq_));
        return P2P_ERR_TIMEOUT;
    }
    if (io != Io::OK) {
        return client_read_abort(dl);  // reports the lost connection
    }
    Header hdr;
    std::vector<uint8_t> payload;
    FrameResult fr = frame_read(fd, dl.extended(cfg_.grace_ms()), all_max(),
                                &hdr, &payload, &err);
    if (fr == FrameResult::TIMEOUT) {
        failed_ = true;
        const std::string why = "rank " + std::to_string(cfg_.rank) + " waited " +
                                std::to_string(cfg_.timeout_ms) +
                                " ms for the result of allgather " + std::to_string(seq_);
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: %s from rank 0", why.c_str());
        // Rank 0 may come yet: it must not answer the others as if all went well.
        abort_send(fd, P2P_ERR_TIMEOUT, why, kAbortSendMs);
        return P2P_ERR_TIMEOUT;
    }
    if (fr == FrameResult::OK && hdr.type == static_cast<uint16_t>(Msg::ABORT)) {
        failed_ = true;
        p2p_status_t st;
        std::string why;
        abort_decode(payload.data(), payload.size(), &st, &why);
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: rank %u: job aborted: %s",
                cfg_.rank, why.c_str());
        return st;
    }
    if (fr == FrameResult::CLOSED || fr == FrameResult::ERROR) {
        failed_ = true;
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: rank %u lost rank 0 during "
                "allgather %llu (%s)", cfg_.rank,
                static_cast<unsigned long long>(seq_),
                fr == FrameResult::ERROR ? errno_string(err).c_str()
                                         : frame_result_string(fr));
        return P2P_ERR_BOOTSTRAP;
    }
    uint64_t got_seq = 0;
    std::vector<std::vector<uint8_t>> blobs;
    if (fr != FrameResult::OK || hdr.type != static_cast<uint16_t>(Msg::ALL) ||
        !all_decode(payload.data(), payload.size(), cfg_.size, &got_seq, &blobs) ||
        got_seq != seq_) {
        failed_ = true;
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: rank %u: allgather %llu failed: %s",
                cfg_.rank, static_cast<unsigned long long>(seq_),
                fr == FrameResult::OK ? "malformed or out-of-step result from rank 0"
                                      : frame_result_string(fr));
        return P2P_ERR_BOOTSTRAP;
    }
    all_p->swap(blobs);
    return P2P_OK;
}

p2p_status_t TcpBootstrap::barrier() {
    std::vector<std::vector<uint8_t>> all;
    return allgather(std::vector<uint8_t>(), &all);
}

void TcpBootstrap::abort(const char *reason) {
    if (failed_) {
        return;
    }
    std::string why = "rank " + std::to_string(cfg_.rank) + " aborted: " +
                      (reason != nullptr ? reason : "(no reason)");
    if (cfg_.rank == 0) {
        root_fail(P2P_ERR_BOOTSTRAP, why);
        return;
    }
    P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: %s", why.c_str());
    abort_send(rv_.root.get(), P2P_ERR_BOOTSTRAP, why, kAbortSendMs);
    failed_ = true;
}

} // namespace

bool tcp_bootstrap_env_present() {
    const char *from = nullptr;
    return !tcp_env_value("P2P_RANK", "RANK", &from).empty() &&
           !tcp_env_value("P2P_WORLD_SIZE", "WORLD_SIZE", &from).empty();
}

p2p_status_t tcp_bootstrap_create(std::unique_ptr<Bootstrap> *out) {
    if (out == nullptr) {
        return P2P_ERR_INVALID_PARAM;
    }
    try {
        const auto t0 = std::chrono::steady_clock::now();
        TcpConfig cfg;
        p2p_status_t st = tcp_config_parse(&cfg);
        if (st != P2P_OK) {
            return st;
        }
        TcpRendezvous rv;
        st = (cfg.rank == 0) ? tcp_rendezvous_root(cfg, &rv)
                             : tcp_rendezvous_client(cfg, &rv);
        if (st != P2P_OK) {
            return st;
        }
        out->reset(new TcpBootstrap(std::move(cfg), std::move(rv)));
        P2P_LOG(P2P_LOG_INFO, "tcp bootstrap: rank %u of %u ready (local %u of "
                "%u) in %.3f ms", (*out)->rank(), (*out)->size(), (*out)->local_rank(),
                (*out)->local_size(),
                std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - t0).count());
        return P2P_OK;
    } catch (const std::bad_alloc &) {
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: out of memory");
        return P2P_ERR_NO_MEMORY;
    } catch (const std::exception &e) {
        P2P_LOG(P2P_LOG_ERROR, "tcp bootstrap: %s", e.what());
        return P2P_ERR_BOOTSTRAP;
    }
}

} // namespace ucxp2p
