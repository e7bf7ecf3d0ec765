/*
 * PMIx bootstrap (see pmix_bootstrap.h). Compiled only when configure found
 * PMIx (HAVE_PMIX); pmix_bootstrap_none.cc provides the same two functions
 * otherwise.
 */
#include "wireup/pmix_bootstrap.h"

#include "core/config.h"
#include "core/log.h"
#include "wireup/deadline_wait.h"

#include <pmix.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

extern char **environ;

namespace ucxp2p {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

enum class Modex { kCollect, kDirect };

const char *modex_name(Modex m) {
    return m == Modex::kCollect ? "collect" : "direct";
}

/** Owner of a pmix_info_t array (PMIX_INFO_CREATE / PMIX_INFO_FREE). */
class InfoArray {
public:
    explicit InfoArray(size_t n) : n_(n) {
        if (n_ > 0) {
            PMIX_INFO_CREATE(info_, n_);
        }
    }
    ~InfoArray() {
        if (info_ != nullptr) {
            PMIX_INFO_FREE(info_, n_);
        }
    }
    InfoArray(const InfoArray &) = delete;
    InfoArray &operator=(const InfoArray &) = delete;

    void load(size_t i, const char *key, const void *data, pmix_data_type_t t) {
        PMIX_INFO_LOAD(&info_[i], key, data, t);
    }
    pmix_info_t *data() const { return info_; }
    size_t size() const { return info_ != nullptr ? n_ : 0; }

private:
    pmix_info_t *info_ = nullptr;
    size_t n_;
};

/** Owner of a value returned by PMIx_Get. */
struct ValueRelease {
    void operator()(pmix_value_t *v) const {
        if (v != nullptr) {
            PMIX_VALUE_RELEASE(v);
        }
    }
};
using ValuePtr = std::unique_ptr<pmix_value_t, ValueRelease>;

/** Any integer-typed PMIx value as uint32 (false when not an integer). */
bool value_to_u32(const pmix_value_t *v, uint32_t *out) {
    switch (v->type) {
    case PMIX_UINT8:  *out = v->data.uint8;  return true;
    case PMIX_UINT16: *out = v->data.uint16; return true;
    case PMIX_UINT32: *out = v->data.uint32; return true;
    case PMIX_UINT64: *out = static_cast<uint32_t>(v->data.uint64); return true;
    case PMIX_UINT:   *out = v->data.uint;   return true;
    case PMIX_PROC_RANK: *out = v->data.rank; return true;
    case PMIX_INT8:   *out = static_cast<uint32_t>(v->data.int8);  return v->data.int8 >= 0;
    case PMIX_INT16:  *out = static_cast<uint32_t>(v->data.int16); return v->data.int16 >= 0;
    case PMIX_INT32:  *out = static_cast<uint32_t>(v->data.int32); return v->data.int32 >= 0;
    case PMIX_INT:    *out = static_cast<uint32_t>(v->data.integer); return v->data.integer >= 0;
    default:          return false;
    }
}

/**
 * One reference on the PMIx client library: PMIx_Init in create(),
 * PMIx_Finalize in the destructor. The library counts Init calls and only
 * really finalizes on the last Finalize, so MPI (or another bootstrap) that
 * initialised PMIx before or after us keeps its connection.
 */
class PmixClient {
public:
    static p2p_status_t create(std::unique_ptr<PmixClient> *out) {
        pmix_proc_t proc;
        PMIX_PROC_CONSTRUCT(&proc);
        pmix_status_t st = PMIx_Init(&proc, nullptr, 0);
        if (st != PMIX_SUCCESS) {
            P2P_LOG(P2P_LOG_ERROR,
                    "pmix bootstrap: PMIx_Init failed: %s (%d); %s",
                    PMIx_Error_string(st), static_cast<int>(st),
                    st == PMIX_ERR_UNREACH
                        ? "no PMIx server: start the job with "
                          "srun --mpi=pmix or mpirun"
                        : "the launcher's PMIx server refused the client");
            return P2P_ERR_UNSUPPORTED;
        }
        out->reset(new PmixClient(proc));
        return P2P_OK;
    }
    ~PmixClient() {
        pmix_status_t st = PMIx_Finalize(nullptr, 0);
        if (st != PMIX_SUCCESS) {
            P2P_LOG(P2P_LOG_WARN, "pmix bootstrap: PMIx_Finalize: %s",
                    PMIx_Error_string(st));
        }
    }
    PmixClient(const PmixClient &) = delete;
    PmixClient &operator=(const PmixClient &) = delete;

    const pmix_proc_t &proc() const { return proc_; }

private:
    explicit PmixClient(const pmix_proc_t &proc) : proc_(proc) {}
    pmix_proc_t proc_;
};

/**
 * Holds one PMIx_Init of the process from its first working bootstrap until
 * exit (or this library's unload: a function-local static): once PMIx
 * 4.2's client has finalized for good, a second PMIx_Init connects but
 * PMIx_Get finds none of the job's data (pmix.lrank: NOT-FOUND), so a
 * bootstrap created after the last one was destroyed failed. Its
 * PMIx_Finalize runs with the other static destructors.
 */
void keep_client_until_exit() {
    static const std::unique_ptr<PmixClient> keeper = [] {
        std::unique_ptr<PmixClient> c;
        if (PmixClient::create(&c) != P2P_OK) {
            c.reset();
        }
        return c;
    }();
    (void)keeper;
}

/** PMIx_Fence_nb's callback (cbdata: DeadlineWait::callback_ref). */
void fence_done(pmix_status_t st, void *cbdata) { DeadlineWait::finish(cbdata, st); }

/**
 * One PMIx_Get_nb: what it reads, and the copy of the value its callback
 * makes (PMIx owns kv only during the callback). Held by the wait's args,
 * so it outlives a caller that stopped waiting.
 */
struct GetOp {
    pmix_proc_t proc;
    std::string key;
    InfoArray info;
    ValuePtr value;
    GetOp(const pmix_proc_t &p, std::string k) : proc(p), key(std::move(k)), info(1) {}
};

/** PMIx_Get_nb's callback (cbdata: DeadlineWait::callback_ref). */
void get_done(pmix_status_t st, pmix_value_t *kv, void *cbdata) {
    auto &w = *static_cast<std::shared_ptr<DeadlineWait> *>(cbdata);
    GetOp *op = static_cast<GetOp *>(w->args.get());
    if (st == PMIX_SUCCESS && kv == nullptr) {
        st = PMIX_ERR_NOT_FOUND;
    } else if (st == PMIX_SUCCESS) {
        pmix_value_t *copy = nullptr;
        PMIX_VALUE_CREATE(copy, 1);
        if (copy == nullptr) {
            st = PMIX_ERR_NOMEM;
        } else {
            op->value.reset(copy);
            st = PMIx_Value_xfer(copy, kv);
        }
    }
    // The waiter reads op->value only after it sees the status under the
    // wait's lock, which finish() takes after these writes.
    DeadlineWait::finish(cbdata, st);
}

/** Distinguishes the keys of successive bootstrap objects of a process. */
std::atomic<uint32_t> g_instance{0};

class PmixBootstrap final : public Bootstrap {
public:
    PmixBootstrap(std::unique_ptr<PmixClient> client, Modex modex,
                  int timeout_s, uint64_t max_msg)
        : client_(std::move(client)), modex_(modex), timeout_s_(timeout_s),
          max_msg_(max_msg) {
        PMIX_LOAD_PROCID(&all_, client_->proc().nspace, PMIX_RANK_WILDCARD);
    }
    PmixBootstrap(const PmixBootstrap &) = delete;
    PmixBootstrap &operator=(const PmixBootstrap &) = delete;

    p2p_status_t query_job();

    uint32_t rank() const override { return client_->proc().rank; }
    uint32_t size() const override { return size_; }
    uint32_t local_rank() const override { return local_rank_; }
    uint32_t local_size() const override { return local_size_; }
    const char *name() const override { return "pmix"; }
    const char *nspace() const { return client_->proc().nspace; }
    Modex modex() const { return modex_; }

    p2p_status_t allgather(const std::vector<uint8_t> &mine,
                           std::vector<std::vector<uint8_t>> *all_p) override;
    /** An empty allgather, not a bare fence: a PMIx server may complete a
     *  fence without a rank that finalized and exited (seen with Open
     *  MPI's mpirun under load: the others' barrier returned OK), while
     *  the key that rank never put makes the exchange fail as it must. */
    p2p_status_t barrier() override {
        std::vector<std::vector<uint8_t>> all;
        return allgather({}, &all);
    }
    void abort(const char *reason) override {
        P2P_LOG(P2P_LOG_ERROR, "pmix bootstrap: aborting the job: %s",
                reason != nullptr ? reason : "(no reason)");
        PMIx_Abort(1, reason != nullptr ? reason : "ucxp2p abort", nullptr, 0);
    }

private:
    p2p_status_t get_u32(const pmix_proc_t &proc, const char *key,
                         uint32_t *out);
    /** Where a fence or a get stops waiting for the server: twice its
     *  PMIX_TIMEOUT and a second from now (see fence()). */
    Clock::time_point deadline() const {
        return Clock::now() + std::chrono::seconds(2 * static_cast<int64_t>(timeout_s_) + 1);
    }
    /** Starts PMIx_Get_nb of key from proc (with PMIX_TIMEOUT); *w waits
     *  for it. A PMIx error when the get was refused (no callback). */
    pmix_status_t get_start(const pmix_proc_t &proc, std::string key,
                            std::shared_ptr<DeadlineWait> *w);
    /** Waits for a started get until end: its value, or the error logged
     *  (P2P_ERR_TIMEOUT when the server did not answer by then). */
    p2p_status_t get_end(DeadlineWait &w, Clock::time_point end, ValuePtr *out);
    p2p_status_t fence(bool collect, const char *what);
    static p2p_status_t from_pmix(pmix_status_t st) {
        return st == PMIX_ERR_TIMEOUT ? P2P_ERR_TIMEOUT : P2P_ERR_BOOTSTRAP;
    }

    std::unique_ptr<PmixClient> client_;
    Modex modex_;
    int timeout_s_;
    uint64_t max_msg_;
    uint32_t instance_ = 0;
    uint64_t seq_ = 0;
    pmix_proc_t all_;
    uint32_t size_ = 0;
    uint32_t local_rank_ = 0;
    uint32_t local_size_ = 0;
};

pmix_status_t PmixBootstrap::get_start(const pmix_proc_t &proc, std::string key,
                                       std::shared_ptr<DeadlineWait> *w) {
    auto op = std::make_shared<GetOp>(proc, std::move(key));
    op->info.load(0, PMIX_TIMEOUT, &timeout_s_, PMIX_INT);
    *w = std::make_shared<DeadlineWait>();
    (*w)->args = op;
    void *ref = DeadlineWait::callback_ref(*w);
    pmix_status_t st = PMIx_Get_nb(&op->proc, op->key.c_str(), op->info.data(),
                                   op->info.size(), get_done, ref);
    if (st != PMIX_SUCCESS) {
        DeadlineWait::drop_ref(ref);  // refused: no callback
        P2P_LOG(P2P_LOG_ERROR, "pmix bootstrap: rank %u: get %s of rank %u refused: %s",
                rank(), op->key.c_str(), op->proc.rank, PMIx_Error_string(st));
        if (st == PMIX_OPERATION_SUCCEEDED) {
            st = PMIX_ERROR;  // done at once, but the value comes only through the callback
        }
    }
    return st;
}

p2p_status_t PmixBootstrap::get_end(DeadlineWait &w, Clock::time_point end, ValuePtr *out) {
    const GetOp &op = *static_cast<const GetOp *>(w.args.get());
    int st = PMIX_ERROR;
    if (!w.wait_until(end, &st)) {
        P2P_LOG(P2P_LOG_ERROR, "pmix bootstrap: rank %u: get %s of rank %u not ended by the "
                "pmix server within %d s (PMIX_TIMEOUT %d s): timed out", rank(),
                op.key.c_str(), op.proc.rank, 2 * timeout_s_ + 1, timeout_s_);
        return P2P_ERR_TIMEOUT;  // the callback, if it comes, frees op
    }
    if (st != PMIX_SUCCESS) {
        P2P_LOG(P2P_LOG_ERROR, "pmix bootstrap: rank %u: get %s of rank %u: %s", rank(),
                op.key.c_str(), op.proc.rank, PMIx_Error_string(st));
        return from_pmix(st);
    }
    // Finished: the callback is done with op, which this caller now owns.
    *out = std::move(static_cast<GetOp *>(w.args.get())->value);
    return P2P_OK;
}

p2p_status_t PmixBootstrap::get_u32(const pmix_proc_t &proc, const char *key,
                                    uint32_t *out) {
    std::shared_ptr<DeadlineWait> w;
    pmix_status_t pst = get_start(proc, key, &w);
    if (pst != PMIX_SUCCESS) {
        return from_pmix(pst);
    }
    ValuePtr val;
    p2p_status_t st = get_end(*w, deadline(), &val);
    if (st != P2P_OK) {
        return st;
    }
    if (!value_to_u32(val.get(), out)) {
        P2P_LOG(P2P_LOG_ERROR, "pmix bootstrap: %s has non-integer type %s",
                key, PMIx_Data_type_string(val->type));
        return P2P_ERR_BOOTSTRAP;
    }
    return P2P_OK;
}

p2p_status_t PmixBootstrap::query_job() {
    p2p_status_t st = get_u32(all_, PMIX_JOB_SIZE, &size_);
    if (st != P2P_OK) {
        return st;
    }
    st = get_u32(client_->proc(), PMIX_LOCAL_RANK, &local_rank_);
    if (st != P2P_OK) {
        return st;
    }
    st = get_u32(all_, PMIX_LOCAL_SIZE, &local_size_);
    if (st != P2P_OK) {
        return st;
    }
    if (size_ == 0 || rank() >= size_ || local_size_ == 0 ||
        local_rank_ >= local_size_ || local_size_ > size_) {
        P2P_LOG(P2P_LOG_ERROR,
                "pmix bootstrap: inconsistent job info: rank %u size %u "
                "local rank %u local size %u",
                rank(), size_, local_rank_, local_size_);
        return P2P_ERR_BOOTSTRAP;
    }
    // Numbered only once usable: a create that failed here and is tried
    // again must use the same keys as the ranks whose first try worked.
    instance_ = g_instance.fetch_add(1);
    return P2P_OK;
}

// The fence asks the server for timeout_s_ (PMIX_TIMEOUT) and also waits
// no longer than twice that plus a second itself: Open MPI's server once
// kept a fence of a job whose rank had exited past a 2 s PMIX_TIMEOUT for
// over 55 s (CI, test/slurm/pmix_test.sh --gone 3; it ends in 2 s there
// otherwise), and a bootstrap call must end within its timeout.
p2p_status_t PmixBootstrap::fence(bool collect, const char *what) {
    // The procs and info live as long as the wait does (until the callback
    // too): a fence this call stopped waiting for may still read them.
    struct Args {
        pmix_proc_t proc;
        InfoArray info;
        explicit Args(size_t n) : proc(), info(n) {}
    };
    auto args = std::make_shared<Args>(collect ? 2 : 1);
    args->proc = all_;
    args->info.load(0, PMIX_TIMEOUT, &timeout_s_, PMIX_INT);
    if (collect) {
        bool yes = true;
        args->info.load(1, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    }
    auto w = std::make_shared<DeadlineWait>();
    w->args = args;
    void *ref = DeadlineWait::callback_ref(w);
    pmix_status_t st = PMIx_Fence_nb(&args->proc, 1, args->info.data(), args->info.size(),
                                     fence_done, ref);
    if (st == PMIX_SUCCESS) {
        int got = PMIX_ERROR;
        if (!w->wait_until(deadline(), &got)) {
            P2P_LOG(P2P_LOG_ERROR, "pmix bootstrap: rank %u: fence (%s) not ended by "
                    "the pmix server within %d s (PMIX_TIMEOUT %d s): timed out",
                    rank(), what, 2 * timeout_s_ + 1, timeout_s_);
            return P2P_ERR_TIMEOUT;  // the callback, if it comes, drops ref
        }
        st = got;
    } else {
        DeadlineWait::drop_ref(ref);  // no callback: done at once, or refused
        if (st == PMIX_OPERATION_SUCCEEDED) st = PMIX_SUCCESS;
    }
    if (st != PMIX_SUCCESS) {
        P2P_LOG(P2P_LOG_ERROR, "pmix bootstrap: rank %u: fence (%s) failed: %s",
                rank(), what, PMIx_Error_string(st));
        return from_pmix(st);
    }
    return P2P_OK;
}

p2p_status_t PmixBootstrap::allgather(
    const std::vector<uint8_t> &mine,
    std::vector<std::vector<uint8_t>> *all_p) {
    if (all_p == nullptr) {
        return P2P_ERR_INVALID_PARAM;
    }
    if (mine.size() > max_msg_) {
        P2P_LOG(P2P_LOG_ERROR,
                "pmix bootstrap: allgather blob of %zu bytes exceeds "
                "P2P_BOOTSTRAP_MAX_MSG (%llu)",
                mine.size(), static_cast<unsigned long long>(max_msg_));
        return P2P_ERR_INVALID_PARAM;
    }
    Clock::time_point t0 = Clock::now();
    // A new key per collective. PMIx's cost per collective grows with the
    // keys a process committed before (docs/WIREUP.md), but reusing keys
    // is not safe: a client that keeps fetched values in its cache (gds
    // hash) returned the old value for a key put again, and PMIx 4.2
    // answered NOT-FOUND for a key put again with another size.
    std::string key = "ucxp2p.ag." + std::to_string(instance_) + "." +
                      std::to_string(seq_++);

    // The blob travels with a one-byte header so that an empty contribution
    // is still a non-empty byte object (PMIx treats size 0 as "no data").
    std::vector<char> buf(mine.size() + 1);
    buf[0] = 1;
    if (!mine.empty()) {
        std::memcpy(buf.data() + 1, mine.data(), mine.size());
    }
    pmix_value_t val;
    PMIX_VALUE_CONSTRUCT(&val);
    val.type = PMIX_BYTE_OBJECT;
    val.data.bo.bytes = buf.data();
    val.data.bo.size = buf.size();
    pmix_status_t st = PMIx_Put(PMIX_GLOBAL, key.c_str(), &val);
    if (st == PMIX_SUCCESS) {
        st = PMIx_Commit();
    }
    if (st != PMIX_SUCCESS) {
        P2P_LOG(P2P_LOG_ERROR, "pmix bootstrap: rank %u: put/commit %s: %s",
                rank(), key.c_str(), PMIx_Error_string(st));
        return P2P_ERR_BOOTSTRAP;
    }
    p2p_status_t pst = fence(modex_ == Modex::kCollect, key.c_str());
    if (pst != P2P_OK) {
        return pst;
    }
    double fence_ms = ms_since(t0);

    // Every rank's get is asked for before the first is waited for: with
    // the direct modex each is a round trip through the server, and they
    // overlap. All end by one deadline (a server may ignore PMIX_TIMEOUT,
    // as with fences).
    std::vector<std::shared_ptr<DeadlineWait>> gets(size_);
    for (uint32_t r = 0; r < size_; ++r) {
        pmix_proc_t peer;
        PMIX_LOAD_PROCID(&peer, nspace(), r);
        st = get_start(peer, key, &gets[r]);
        if (st != PMIX_SUCCESS) {
            return from_pmix(st);
        }
    }
    const Clock::time_point end = deadline();
    std::vector<std::vector<uint8_t>> all(size_);
    for (uint32_t r = 0; r < size_; ++r) {
        ValuePtr got;
        pst = get_end(*gets[r], end, &got);
        if (pst != P2P_OK) {
            return pst;
        }
        if (got->type != PMIX_BYTE_OBJECT || got->data.bo.size < 1 ||
            got->data.bo.bytes == nullptr || got->data.bo.bytes[0] != 1) {
            P2P_LOG(P2P_LOG_ERROR,
                    "pmix bootstrap: rank %u: %s of rank %u is malformed "
                    "(type %s)",
                    rank(), key.c_str(), r, PMIx_Data_type_string(got->type));
            return P2P_ERR_BOOTSTRAP;
        }
        const uint8_t *p =
            reinterpret_cast<const uint8_t *>(got->data.bo.bytes) + 1;
        all[r].assign(p, p + got->data.bo.size - 1);
    }
    P2P_LOG(P2P_LOG_DEBUG,
            "pmix bootstrap: rank %u: allgather %s (%zu bytes, modex %s): "
            "fence %.3f ms, total %.3f ms",
            rank(), key.c_str(), mine.size(), modex_name(modex_), fence_ms,
            ms_since(t0));
    *all_p = std::move(all);
    return P2P_OK;
}

p2p_status_t parse_modex(Modex *out) {
    std::string s = config_get("P2P_PMIX_MODEX");
    if (strcasecmp(s.c_str(), "collect") == 0) {
        *out = Modex::kCollect;
    } else if (strcasecmp(s.c_str(), "direct") == 0) {
        *out = Modex::kDirect;
    } else {
        P2P_LOG(P2P_LOG_ERROR,
                "pmix bootstrap: P2P_PMIX_MODEX='%s' is not collect or direct",
                s.c_str());
        return P2P_ERR_INVALID_PARAM;
    }
    return P2P_OK;
}

} // namespace

bool pmix_bootstrap_launched() {
    if (std::getenv("PMIX_RANK") != nullptr ||
        std::getenv("PMIX_NAMESPACE") != nullptr) {
        return true;
    }
    for (char **e = environ; e != nullptr && *e != nullptr; ++e) {
        if (std::strncmp(*e, "PMIX_SERVER_URI", 15) == 0) {
            return true;
        }
    }
    return false;
}

p2p_status_t pmix_bootstrap_create(std::unique_ptr<Bootstrap> *out) {
    if (out == nullptr) {
        return P2P_ERR_INVALID_PARAM;
    }
    Modex modex;
    p2p_status_t st = parse_modex(&modex);
    if (st != P2P_OK) {
        return st;
    }
    uint64_t timeout_ms = 0;
    st = bootstrap_timeout_ms(&timeout_ms);
    if (st != P2P_OK) {
        return st;
    }
    uint64_t max_msg = 0;
    st = bootstrap_max_msg(&max_msg);
    if (st != P2P_OK) {
        return st;
    }
    // PMIx timeouts are whole seconds and 0 means "never": round up (the
    // timeout is at least 1 ms).
    int timeout_s = static_cast<int>((timeout_ms + 999) / 1000);

    Clock::time_point t0 = Clock::now();
    std::unique_ptr<PmixClient> client;
    st = PmixClient::create(&client);
    if (st != P2P_OK) {
        return st;
    }
    double init_ms = ms_since(t0);
    auto boot = std::make_unique<PmixBootstrap>(std::move(client), modex,
                                                timeout_s, max_msg);
    st = boot->query_job();
    if (st != P2P_OK) {
        return st;
    }
    keep_client_until_exit();
    log_set_rank(static_cast<int>(boot->rank()));
    P2P_LOG(P2P_LOG_INFO,
            "pmix bootstrap: rank %u of %u (local %u of %u) in namespace %s, "
            "modex %s: wireup %.3f ms (PMIx_Init %.3f ms)",
            boot->rank(), boot->size(), boot->local_rank(), boot->local_size(),
            boot->nspace(), modex_name(boot->modex()), ms_since(t0), init_ms);
    *out = std::move(boot);
    return P2P_OK;
}

} // namespace ucxp2p
