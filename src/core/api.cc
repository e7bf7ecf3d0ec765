/*
 * The C entry points of contexts and communicators (posts, completions):
 * handle lookup, argument validation, and an exception barrier so no C++
 * exception crosses the C API. Registrations: api_mem.cc; bootstraps:
 * api_bootstrap.cc; the registries they share: api_handles.h.
 */
#include "core/api_handles.h"
#include "core/comm_send.h"
#include "core/guard.h"
#include "core/log.h"
#include "core/rcu.h"
#include "core/stack_buf.h"

#include <ucxp2p/p2p.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include <sched.h>

using namespace ucxp2p;
using namespace ucxp2p::api;

namespace {

/** A registration may serve comm's posts only if both belong to one context. */
p2p_status_t check_mem_of(Comm &comm, const MemEntry &m) {
    if (m.mem.ctx_id != comm.ctx_id()) {
        P2P_LOG(P2P_LOG_ERROR, "comm %u: registration belongs to another context",
                comm.id());
        return P2P_ERR_INVALID_PARAM;
    }
    return P2P_OK;
}

/** A block of staged device memory: UCX moves the host copy, a send's
 *  bytes copied there now (core/staging.h). Out of line: the per-message
 *  path of host memory pays only the test of Mem::shadow. */
__attribute__((noinline, cold)) p2p_status_t stage_item(bool is_send, const Mem &mem,
                                                        const void **buffer, size_t length) {
    *buffer = mem.shadow->to_host(*buffer);
    return is_send ? mem.shadow->pull(*buffer, length) : P2P_OK;
}

/** A receive into memory registered read-only (logged). */
__attribute__((noinline, cold)) p2p_status_t not_writable(const Comm &comm, const void *buffer) {
    P2P_LOG(P2P_LOG_ERROR, "comm %u: receive into %p: its registration is read-only memory",
            comm.id(), buffer);
    return P2P_ERR_INVALID_PARAM;
}

/** Validate one block against comm and its registration m (already
 *  checked by check_mem_of); fills item. Always inline: left to itself,
 *  the compiler calls it once it grew the staged branch, ~37 more
 *  instructions per message (rate_ab.sh -i). */
__attribute__((always_inline)) inline p2p_status_t
check_item(bool is_send, Comm &comm, uint32_t peer, uint32_t tensor_id, const void *buffer,
           size_t length, MemEntry &m, void *user_context, PostItem *item) {
    if (buffer == nullptr) return P2P_ERR_INVALID_PARAM;
    if (peer >= comm.size()) return P2P_ERR_BAD_RANK;
    if (!m.mem.contains(buffer, length)) return P2P_ERR_NOT_REGISTERED;
    if (!is_send && __builtin_expect(!m.mem.writable, 0)) return not_writable(comm, buffer);
    if (__builtin_expect(m.mem.shadow != nullptr, 0)) {
        p2p_status_t st = stage_item(is_send, m.mem, &buffer, length);
        if (st != P2P_OK) return st;
    }
    item->peer = peer;
    item->tensor_id = tensor_id;
    item->buffer = const_cast<void *>(buffer);
    item->length = length;
    item->mem = &m.mem;
    item->user_context = user_context;
    return P2P_OK;
}

/** Batches up to this many blocks are staged on the stack. */
constexpr size_t kStackBlocks = 64;

// The per-message calls below (posts, p2p_comm_poll) look handles up with
// Registry::peek inside a ReadSection (core/rcu.h): no atomic
// read-modify-write per call. A registration found this way is taken for
// the operation under the worker lock (Mem::acquire), where deregistration
// marks it dead.

p2p_status_t post_blocks(bool is_send, p2p_comm_h comm_h, const p2p_block_t *blocks,
                         size_t count, size_t *bad_index_p) {
    try {
        ReadSection rs;
        CommEntry *c = g_comms.peek(handle_id(comm_h));
        if (c == nullptr) return P2P_ERR_INVALID_HANDLE;
        if (blocks == nullptr && count > 0) return P2P_ERR_INVALID_PARAM;
        if (c->comm->is_shut()) return P2P_ERR_SHUTDOWN;
        StackBuf<PostItem, kStackBlocks> items(count);
        // A batch usually draws on one registration (or a few): look each
        // up once per run of blocks that name it, not once per block.
        p2p_mem_h last_h = nullptr;
        MemEntry *last = nullptr;
        for (size_t i = 0; i < count; ++i) {
            const p2p_block_t &b = blocks[i];
            if (last == nullptr || b.mem != last_h) {
                MemEntry *m = g_mems.peek(handle_id(b.mem));
                p2p_status_t st = P2P_OK;
                if (m == nullptr) {
                    st = P2P_ERR_INVALID_HANDLE;
                } else if (b.buffer == nullptr) {  // param before context
                    st = P2P_ERR_INVALID_PARAM;
                } else {
                    st = check_mem_of(*c->comm, *m);
                }
                if (st != P2P_OK) {
                    if (bad_index_p != nullptr) *bad_index_p = i;
                    return st;
                }
                last = m;
                last_h = b.mem;
            }
            p2p_status_t st = check_item(is_send, *c->comm, b.peer, b.tensor_id, b.buffer,
                                         b.length, *last, b.user_context, &items[i]);
            if (st != P2P_OK) {
                if (bad_index_p != nullptr) *bad_index_p = i;
                return st;
            }
        }
        return c->comm->post(is_send, items.data(), count, bad_index_p);
    } catch (...) {
        return caught(is_send ? "send" : "recv");
    }
}

// Always inline: p2p_comm_send and p2p_comm_recv pass eight arguments, two
// on the stack, so a call costs ~20 instructions per message.
__attribute__((always_inline)) inline p2p_status_t
post_single(bool is_send, p2p_comm_h comm_h, uint32_t peer, uint32_t tensor_id,
            const void *buffer, size_t length, p2p_mem_h mem,
            void *user_context) noexcept {
    try {
        ReadSection rs;
        CommEntry *c = g_comms.peek(handle_id(comm_h));
        if (c == nullptr) return P2P_ERR_INVALID_HANDLE;
        if (c->comm->is_shut()) return P2P_ERR_SHUTDOWN;
        MemEntry *m = g_mems.peek(handle_id(mem));
        if (m == nullptr) return P2P_ERR_INVALID_HANDLE;
        if (buffer == nullptr) return P2P_ERR_INVALID_PARAM;
        p2p_status_t st = check_mem_of(*c->comm, *m);
        if (st != P2P_OK) return st;
        PostItem item;
        st = check_item(is_send, *c->comm, peer, tensor_id, buffer, length, *m, user_context, &item);
        if (st != P2P_OK) return st;
        return is_send ? c->comm->send_single(item) : c->comm->recv_single(item);
    } catch (...) {
        return caught(is_send ? "send" : "recv");
    }
}

/** A C caller may pass any int as the queue: check its bits, not the C++
 *  enum (a value outside the enumerators is undefined as the enum type). */
bool valid_queue(const p2p_queue_t &q) {
    int v;
    std::memcpy(&v, &q, sizeof(v));
    return v == P2P_QUEUE_SEND || v == P2P_QUEUE_RECV;
}

/** p2p_comm_signal on a communicator it found. The queue by reference,
 *  as valid_queue reads it: a copy would load the C caller's int as the
 *  enum type (undefined for a value outside it; UBSAN stops there). */
p2p_status_t signal_queue(Comm &comm, const p2p_queue_t &queue) {
    if (!valid_queue(queue)) return P2P_ERR_INVALID_PARAM;
    comm.queue(queue).signal();             // a wait blocked on the queue
    comm.context().progress().wake_idle();  // a serialized wait sleeps on events
    return P2P_OK;
}

}  // namespace

extern "C" {

p2p_status_t p2p_context_create(const p2p_config_t *config, p2p_context_h *context_p) {
    return guarded("context", [&]() -> p2p_status_t {
        if (context_p == nullptr) return P2P_ERR_INVALID_PARAM;
        ContextSettings s;
        p2p_status_t st = context_settings_resolve(config, &s);
        if (st != P2P_OK) return st;
        st = context_check_message_transport();
        if (st != P2P_OK) return st;
        std::unique_ptr<Context> ctx;
        st = Context::create(s, &ctx);
        if (st != P2P_OK) return st;
        static std::once_flag atexit_once;
        std::call_once(atexit_once, [] { std::atexit(stop_all_progress); });
        auto e = std::make_unique<ContextEntry>();
        e->ctx = std::shared_ptr<Context>(std::move(ctx));
        ContextEntry *raw = e.get();
        uint64_t id = g_contexts.add(std::move(e));
        if (id == 0) return P2P_ERR_NO_MEMORY;  // out of handle slots
        raw->id = id;  // before the handle is returned: no one else sees it yet
        *context_p = handle_from_id<p2p_context_h>(id);
        return P2P_OK;
    });
}

p2p_status_t p2p_context_destroy(p2p_context_h context) {
    return guarded("context", [&]() -> p2p_status_t {
        Registry<ContextEntry>::Ref e = g_contexts.remove(handle_id(context));
        if (!e) return P2P_ERR_INVALID_HANDLE;
        uint64_t id = e->id;
        // Communicators first (they cancel and drain their operations), then
        // registrations, then the progress thread and UCX objects. Nothing
        // here allocates: once the context is unregistered, it goes whole.
        // Shut each down here, not in ~Comm: a call still inside one (a
        // waiter in p2p_comm_wait) holds a reference, and its operations
        // must be canceled (the waiter woken) before their registrations go.
        size_t ncomms = 0;
        g_comms.remove_each([id](CommEntry &c) { return c.comm->ctx_id() == id; },
                            [&ncomms](Registry<CommEntry>::Ref &c) {
                                c->comm->shutdown();
                                ++ncomms;
                            });
        if (ncomms > 0) {
            P2P_LOG(P2P_LOG_INFO, "context: destroyed %zu live communicators", ncomms);
        }
        g_mems.remove_each([id](MemEntry &m) { return m.mem.ctx_id == id; },
                           [](Registry<MemEntry>::Ref &m) {
                               destroy_mem(m);  // marks it dead under the worker lock
                           });
        e->ctx->stop_progress();
        return P2P_OK;
    });
}

p2p_status_t p2p_comm_create(p2p_context_h context, p2p_bootstrap_h bootstrap,
                             p2p_comm_h *comm_p) {
    return guarded("comm", [&]() -> p2p_status_t {
        Registry<ContextEntry>::Ref ce = g_contexts.get(handle_id(context));
        if (!ce) return P2P_ERR_INVALID_HANDLE;
        Registry<BootstrapEntry>::Ref be = g_bootstraps.get(handle_id(bootstrap));
        if (!be) return P2P_ERR_INVALID_HANDLE;
        if (comm_p == nullptr) return P2P_ERR_INVALID_PARAM;
        std::unique_ptr<Comm> comm;
        {
            std::lock_guard<std::mutex> lock(be->mu);
            if (!be->bs) return P2P_ERR_INVALID_HANDLE;
            p2p_status_t st = Comm::create(ce->ctx, ce->id, *be->bs, &comm);
            if (st != P2P_OK) return st;
        }
        auto e = std::make_unique<CommEntry>();
        e->comm = std::move(comm);
        uint64_t id = g_comms.add(std::move(e));
        if (id == 0) return P2P_ERR_NO_MEMORY;
        // The context may have been destroyed meanwhile: then undo.
        if (!g_contexts.get(ce->id)) {
            g_comms.remove(id);
            return P2P_ERR_INVALID_HANDLE;
        }
        *comm_p = handle_from_id<p2p_comm_h>(id);
        return P2P_OK;
    });
}

p2p_status_t p2p_comm_query(p2p_comm_h comm, p2p_comm_info_t *info_p) {
    return guarded("comm", [&]() -> p2p_status_t {
        Registry<CommEntry>::Ref c = g_comms.get(handle_id(comm));
        if (!c) return P2P_ERR_INVALID_HANDLE;
        if (info_p == nullptr) return P2P_ERR_INVALID_PARAM;
        info_p->rank = c->comm->rank();
        info_p->size = c->comm->size();
        info_p->local_rank = c->comm->local_rank();
        info_p->local_size = c->comm->local_size();
        info_p->id = c->comm->id();
        return P2P_OK;
    });
}

p2p_status_t p2p_comm_shutdown(p2p_comm_h comm) {
    return guarded("comm", [&]() -> p2p_status_t {
        Registry<CommEntry>::Ref c = g_comms.get(handle_id(comm));
        if (!c) return P2P_ERR_INVALID_HANDLE;
        c->comm->shutdown();
        return P2P_OK;
    });
}

p2p_status_t p2p_comm_cancel_recv(p2p_comm_h comm, uint32_t peer, uint32_t tensor_id,
                                  size_t *count_p) {
    return guarded("comm", [&]() -> p2p_status_t {
        Registry<CommEntry>::Ref c = g_comms.get(handle_id(comm));
        if (!c) return P2P_ERR_INVALID_HANDLE;
        if (peer >= c->comm->size()) return P2P_ERR_BAD_RANK;
        const size_t n = c->comm->cancel_recv(peer, tensor_id);
        if (count_p != nullptr) *count_p = n;
        return P2P_OK;
    });
}

p2p_status_t p2p_comm_destroy(p2p_comm_h comm) {
    return guarded("comm", [&]() -> p2p_status_t {
        Registry<CommEntry>::Ref c = g_comms.remove(handle_id(comm));
        if (!c) return P2P_ERR_INVALID_HANDLE;
        // Freed when the last in-flight API call on it returns.
        c->comm->shutdown();
        return P2P_OK;
    });
}

p2p_status_t p2p_comm_send(p2p_comm_h comm, uint32_t peer, uint32_t tensor_id,
                           const void *buffer, size_t length, p2p_mem_h mem,
                           void *user_context) {
    return post_single(true, comm, peer, tensor_id, buffer, length, mem, user_context);
}

p2p_status_t p2p_comm_recv(p2p_comm_h comm, uint32_t peer, uint32_t tensor_id,
                           void *buffer, size_t length, p2p_mem_h mem,
                           void *user_context) {
    return post_single(false, comm, peer, tensor_id, buffer, length, mem, user_context);
}

p2p_status_t p2p_comm_send_batch(p2p_comm_h comm, const p2p_block_t *blocks,
                                 size_t count, size_t *bad_index_p) {
    return post_blocks(true, comm, blocks, count, bad_index_p);
}

p2p_status_t p2p_comm_recv_batch(p2p_comm_h comm, const p2p_block_t *blocks,
                                 size_t count, size_t *bad_index_p) {
    return post_blocks(false, comm, blocks, count, bad_index_p);
}

p2p_status_t p2p_comm_poll(p2p_comm_h comm, p2p_queue_t queue,
                           p2p_completion_t *entries, size_t max, size_t *count_p) {
    try {
        ReadSection rs;  // see post_blocks
        CommEntry *c = g_comms.peek(handle_id(comm));
        if (c == nullptr) return P2P_ERR_INVALID_HANDLE;
        if (!valid_queue(queue) || entries == nullptr || count_p == nullptr || max == 0) {
            return P2P_ERR_INVALID_PARAM;
        }
        CompletionQueue &q = c->comm->queue(queue);
        if (q.empty()) {
            // The caller is polling: drive progress here (cheaper than a
            // hand-off to the progress thread) if nobody else is -- when
            // this queue awaits something; without a progress thread
            // (P2P_THREAD_SERIALIZED) always, as nothing else progresses.
            Context &ctx = c->comm->context();
            Progress &pr = ctx.progress();
            if (q.pending() != 0 || pr.serialized()) pr.try_progress_from_user();
            // Another thread of ours moves payloads: the tcp server's
            // (core/tcp_bulk.h) for peers reading from us, or whoever runs
            // the copy queue (same-host copies, tcp reads; core/copy_queue.h)
            // while this caller polls. Sharing our core (ranks pinned to
            // one each), it would wait for the caller spinning here to use
            // up its turn -- a millisecond or more per message. An empty
            // poll lets it run first (returns at once when nothing waits).
            if (__builtin_expect(pr.copies().running() || ctx.bulk_serving(), 0) &&
                q.empty()) {
                sched_yield();
            }
        }
        *count_p = q.pop(entries, max);
        return P2P_OK;
    } catch (...) {
        return caught("comm");
    }
}

p2p_status_t p2p_comm_wait(p2p_comm_h comm, p2p_queue_t queue,
                           p2p_completion_t *entries, size_t max, size_t *count_p,
                           int timeout_ms) {
    return guarded("comm", [&]() -> p2p_status_t {
        Registry<CommEntry>::Ref c = g_comms.get(handle_id(comm));
        if (!c) return P2P_ERR_INVALID_HANDLE;
        if (!valid_queue(queue) || entries == nullptr || count_p == nullptr || max == 0) {
            return P2P_ERR_INVALID_PARAM;
        }
        if (timeout_ms < -1) return P2P_ERR_INVALID_PARAM;  // -1 is forever
        return c->comm->wait(queue, entries, max, count_p, timeout_ms);
    });
}

p2p_status_t p2p_comm_signal(p2p_comm_h comm, p2p_queue_t queue) {
    return guarded("comm", [&]() -> p2p_status_t {
        // A read section, not a reference: one dropped last here would tear
        // the communicator down after p2p_comm_destroy returned (serialized
        // mode: beside the application's next call, which its lock does not
        // exclude). The destroy waits for the section (a notify, a write).
        try {
            ReadSection rs;
            CommEntry *c = g_comms.peek(handle_id(comm));
            return c == nullptr ? P2P_ERR_INVALID_HANDLE : signal_queue(*c->comm, queue);
        } catch (const std::bad_alloc &) {
            // no record for this thread's first section: a reference then
        }
        Registry<CommEntry>::Ref c = g_comms.get(handle_id(comm));
        return c ? signal_queue(*c->comm, queue) : P2P_ERR_INVALID_HANDLE;
    });
}

p2p_status_t p2p_comm_pending(p2p_comm_h comm, p2p_queue_t queue, size_t *count_p) {
    return guarded("comm", [&]() -> p2p_status_t {
        Registry<CommEntry>::Ref c = g_comms.get(handle_id(comm));
        if (!c) return P2P_ERR_INVALID_HANDLE;
        if (!valid_queue(queue) || count_p == nullptr) return P2P_ERR_INVALID_PARAM;
        *count_p = c->comm->queue(queue).pending();
        return P2P_OK;
    });
}

} // extern "C"
