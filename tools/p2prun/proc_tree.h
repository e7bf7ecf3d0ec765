// p2prun: the processes p2prun started, directly or not, as /proc shows them.
// p2prun is a child subreaper, so a descendant stays one when its parent dies.
#ifndef P2PRUN_PROC_TREE_H
#define P2PRUN_PROC_TREE_H

#include <sys/types.h>

#include <set>
#include <vector>

namespace p2prun {

struct ProcEntry {
    pid_t pid;
    pid_t ppid;
    pid_t pgrp;
    bool zombie;  // exited, not reaped yet
};

// Every process whose chain of parents leads to this one (zombies included).
// A snapshot: processes start and end while /proc is read.
std::vector<ProcEntry> list_descendants();

// The process groups that have a live member other than their leader among
// `procs` (the group of a rank whose leader exited, say). Zombies do not
// count: nothing is left of them to signal, and a parent that left the group
// (setsid) may never reap one.
std::set<pid_t> groups_with_members(const std::vector<ProcEntry> &procs);

// SIGKILLs and reaps every descendant (those that left the ranks' groups
// with setsid, say), for at most about `rounds` * 10 ms. Only children are
// signalled -- they cannot be reaped by anyone else, so their pids are not
// reused meanwhile -- and the grandchildren, re-parented to p2prun as their
// parents die, in the rounds after. Returns how many are left.
size_t kill_descendants(int rounds);

} // namespace p2prun

#endif
