/*
 * Single-copy transfers between ranks on one host through Linux cross
 * memory attach (process_vm_readv), under our own rendezvous.
 *
 * Why not UCX's CMA transport: endpoints are created with peer error
 * handling (a dead peer's operations must complete), and UCX 1.13 then
 * drops CMA for rendezvous (its memory domain cannot invalidate a
 * registration), so large same-host messages take a two-copy pipeline
 * through shared memory at a third of the speed. Our protocol keeps peer
 * error handling on every UCX endpoint (control messages ride them) and
 * moves the payload with one kernel copy:
 *
 *   sender                              receiver
 *   post ACK receive (seq)
 *   RTS {seq, addr, len, epoch}  --->   user receive matches the RTS
 *                                       process_vm_readv(data, then epoch)
 *   ACK {status, seq}            <---   ACK (OK | TRUNCATED | FALLBACK | ERROR)
 *   complete the send                   complete the receive
 *
 * FALLBACK: the receiver may not read the sender (ptrace rules, seccomp);
 * the sender then pushes the payload through UCX (PUSH tag, same seq) and
 * stops using single copy towards that peer.
 *
 * Split copy (messages of P2P_CMA_SPLIT bytes or more): one core copies at
 * a fraction of what memory can do, and the sender's core is idle while
 * the receiver reads. The RTS names a split offset; the receiver answers
 * CTS {its buffer address} at once, then reads the head [0, split) while
 * the sender writes the tail with process_vm_writev and reports it:
 *
 *   RTS {.., split}              --->   post WDONE receive, CTS {addr}
 *   CTS                          <---   read head (data, then epoch)
 *   write tail, WDONE {status}   --->
 *   ACK                          <---   (after head and WDONE) complete
 *   complete the send
 *
 * A receive whose tail the sender may be writing completes only when the
 * WDONE arrives (OK, CANCELLED by the sender, NOT_ALLOWED: the receiver
 * then reads the tail itself, ERROR) or the sender's process is gone: it
 * is never cancelled by the receiver's own shutdown, so the sender never
 * writes into a buffer the receiver's user owns again. The sender writes
 * only while its send is live (nothing cancels a send while it writes:
 * core/comm_copy.cc), and a send cancelled before its CTS was answered
 * sends WDONE CANCELLED.
 * WDONE travels as an ACK-kind message whose seq has bit 31 set (seqs are
 * 31-bit), so it never matches the receiver's own ACK receives.
 *
 * The epoch: a counter in a process-wide table (slot = seq modulo its size,
 * never freed) that the sender bumps before it completes a single-copy send
 * without an ACK (cancelled by shutdown or by a failure report). The
 * receiver reads it right after the payload; a changed value means the
 * sender's user may already own the buffer again, and the receive fails
 * instead of delivering data that may have changed. Sends sharing a slot
 * can only make each other fail, never deliver stale data.
 */
#ifndef UCXP2P_CORE_CMA_H
#define UCXP2P_CORE_CMA_H

#include <ucxp2p/p2p.h>

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace ucxp2p {
namespace cma {

/** What a rank tells its peers at p2p_comm_create (blob v3). */
struct Identity {
    uint8_t boot_id[16];  // /proc/sys/kernel/random/boot_id
    uint64_t pid_ns;      // inode of /proc/self/ns/pid
    uint32_t pid;
    uint32_t enabled;     // 1: this rank can and may use single copy
    int32_t epoch_fd;     // memfd holding the epoch table (-1: none)
    uint32_t reserved;
    uint64_t epoch_ino;   // its inode
};

/** This process' identity; enabled reflects P2P_CMA, UCX_TLS and a
 *  process_vm_readv self test. Computed once, but for pid: a child made
 *  with fork() after the library ran is another process to its peers. */
Identity local_identity();

/** Process pid of our pid namespace is gone, or a zombie nobody reaped
 *  yet whose threads all ended (pid 0: never). A zombie main thread whose
 *  other threads run on (it called pthread_exit) is alive. What the
 *  liveness checks of same-host peers ask. */
bool process_gone(uint32_t pid);

/** Same host, same pid namespace, both enabled. */
bool peer_eligible(const Identity &mine, const Identity &theirs);

/** Same host and pid namespace (known on both sides): theirs.pid names
 *  the peer's process here. */
bool same_pid_space(const Identity &mine, const Identity &theirs);

/** P2P_ERR_INVALID_PARAM (logged) when P2P_CMA, P2P_CMA_THRESH,
 *  P2P_CMA_MAPPED_THRESH or P2P_CMA_SPLIT is malformed: context creation
 *  checks them, as every other P2P_* value, although they are read only
 *  when a communicator is created. */
p2p_status_t check_settings();

/** P2P_CMA_THRESH is auto (the default, read once): the sender chooses
 *  per size (core/path_choice.h). */
bool threshold_auto();

/** Smallest message from an application buffer sent by single copy when
 *  P2P_CMA_THRESH is a number (read once; SIZE_MAX when auto). */
size_t threshold();

/** Smallest message from a p2p_mem_alloc buffer (memcpy through the
 *  receiver's mapping) sent by single copy (P2P_CMA_MAPPED_THRESH). */
size_t mapped_threshold();

/** Smallest message split between sender and receiver (P2P_CMA_SPLIT, read
 *  once; SIZE_MAX when 0 = never). */
size_t split_threshold();

/** Where the sender's part of a split message of len bytes starts. */
uint64_t split_offset(uint64_t len);

/** Rendezvous request: travels as the payload of a DATA message with the
 *  send's own tag (core/comm_tag.h), told apart by its size and magic. */
struct Rts {
    uint32_t magic;
    uint32_t seq;
    uint64_t addr;
    uint64_t length;
    uint64_t epoch_addr;
    uint64_t epoch;
    uint64_t split;       // 0: the receiver reads it all; else see above
    // The buffer lies in a region from p2p_mem_alloc (core/shm_region.h):
    // the sender's fd of its memfd (-1: none), inode, offset, length.
    int32_t region_fd;
    uint32_t reserved;
    uint64_t region_ino;
    uint64_t region_off;
    uint64_t region_len;
};
static_assert(sizeof(Rts) == 80, "README.md gives the request's size");
constexpr uint32_t kRtsMagic = 0x43524453;  // "SDRC"

/** Receiver's answer (ACK, CTS) or the sender's WDONE: payload of a
 *  KIND_ACK message. */
struct Ack {
    int32_t status;
    uint32_t seq;
    uint64_t addr;        // CTS: the receiver's buffer
};
enum AckStatus : int32_t { ACK_OK = 0, ACK_TRUNCATED = 1, ACK_FALLBACK = 2,
                           ACK_ERROR = 3, ACK_CTS = 4 };
enum WdoneStatus : int32_t { WDONE_OK = 0, WDONE_NOT_ALLOWED = 1,
                             WDONE_CANCELLED = 2, WDONE_ERROR = 3 };
constexpr uint32_t kWdoneBit = 0x80000000u;

/** A fresh sequence number, unique in this process (31 bits, never 0). */
uint32_t next_seq();

/** The epoch table: kEpochSlots 64-bit words, in a memfd when possible,
 *  then one more word: how many of this process' shareable regions (memfds
 *  named to mem_register, core/mem.h) were closed. A receiver that mapped
 *  some of them checks which are gone when it sees the count move
 *  (shm::PeerMaps::drop_closed), so their memory is not kept alive. */
constexpr size_t kEpochSlots = 4096;
constexpr size_t kClosedWord = kEpochSlots;
constexpr size_t kEpochTableBytes = (kEpochSlots + 1) * sizeof(uint64_t);

/** The closed-regions count in a peer's mapped epoch table. */
uint64_t regions_closed(const uint8_t *epoch_table);

/** Fill the epoch fields of an RTS for send seq. */
void stamp_epoch(Rts *rts, uint32_t seq);

/** Invalidate single-copy send seq (and any sharing its slot). */
void bump_epoch(uint32_t seq);

enum class ReadResult {
    OK,           // payload read and the sender did not cancel meanwhile
    CANCELLED,    // payload read, but the sender's epoch moved: discard
    NOT_ALLOWED,  // EPERM/EACCES/ENOSYS: use the fallback
    PEER_GONE,    // ESRCH
    FAILED,       // anything else (errno kept in *err)
};

/** Read bytes [off, off + len) of the sender's buffer (rts) from pid into
 *  dst + off, then the sender's epoch. A read that fails (EFAULT: the
 *  sender's user unmapped the buffer of a withdrawn send) is CANCELLED when
 *  the epoch moved. */
ReadResult read(pid_t pid, const Rts &rts, uint64_t off, uint64_t len,
                void *dst, int *err);

/** The sender's epoch word for seq in its mapped table no longer holds
 *  epoch: the send was withdrawn (its buffer may be gone). */
bool epoch_moved(const uint8_t *epoch_table, uint32_t seq, uint64_t epoch);

/** Copy len bytes from src (a mapping of the sender's region) to dst, then
 *  check the sender's epoch word for seq in its mapped table. */
ReadResult copy_mapped(const uint8_t *src, uint64_t len, void *dst,
                       const uint8_t *epoch_table, uint32_t seq, uint64_t epoch);

/** Read bytes [off, off + len) of the sender's payload (rts) into dst +
 *  off: copy_mapped from base, its payload's first byte in its region
 *  mapped here (epochs: its epoch table), or read() from pid when base is
 *  nullptr. */
ReadResult copy_in(pid_t pid, const Rts &rts, const uint8_t *base,
                   const uint8_t *epochs, uint64_t off, uint64_t len, void *dst,
                   int *err);

/** Write len bytes from src to remote in pid (the sender's part of a split
 *  message). CANCELLED is never returned. */
ReadResult write(pid_t pid, const void *src, uint64_t len, uint64_t remote,
                 int *err);

}  // namespace cma
}  // namespace ucxp2p

#endif
