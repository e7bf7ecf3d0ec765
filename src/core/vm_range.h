/*
 * What this process may do with a range of its address space, read from
 * /proc/self/maps: p2p_mem_register refuses host memory that is not mapped
 * (UCX would fault in the middle of a transfer, in the application's thread
 * or the progress thread) and remembers whether it may be written (a
 * receive into read-only memory would fault the same way).
 * Registration time only: reading the maps costs about 0.1 us per mapping
 * of the process (25 us per registration with the ~270 of a process that
 * loaded UCX, against 39 us for the rest of register + deregister).
 */
#ifndef UCXP2P_CORE_VM_RANGE_H
#define UCXP2P_CORE_VM_RANGE_H

#include <cstddef>

namespace ucxp2p {
namespace vm {

/** Weakest access over a range, weakest first. */
enum class Access {
    UNMAPPED,    // some page of it is not mapped
    NO_ACCESS,   // mapped, but some page neither readable nor writable (PROT_NONE)
    READ_ONLY,   // every page readable, some not writable
    READ_WRITE,  // every page readable and writable
    UNKNOWN,     // the maps could not be read (no /proc): not checked
};

const char *access_name(Access a);

/** Access to the pages holding [addr, addr + len) (len > 0, no wrap), from
 *  maps_path (a file in /proc/PID/maps format; tests give their own). A
 *  range found unmapped or inaccessible is read a second time before it is
 *  reported, so a mapping changed elsewhere while the file was read never
 *  refuses a good range. */
Access range_access(const void *addr, size_t len, const char *maps_path = "/proc/self/maps");

}  // namespace vm
}  // namespace ucxp2p

#endif
