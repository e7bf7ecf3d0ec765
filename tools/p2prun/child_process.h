// p2prun: owner of one rank process, started in a process group of its own so
// that signals reach its descendants too. A ChildProcess not reaped when
// destroyed has its group killed and is reaped.
#ifndef P2PRUN_CHILD_PROCESS_H
#define P2PRUN_CHILD_PROCESS_H

#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace p2prun {

class ChildProcess {
public:
    ChildProcess() = default;
    ~ChildProcess();
    ChildProcess(const ChildProcess &) = delete;
    ChildProcess &operator=(const ChildProcess &) = delete;

    // Starts argv[0] (searched in the PATH of `env`) with exactly `env`, stdin from
    // /dev/null, stdout/stderr on out_fd/err_fd, in a new process group,
    // with SIGKILL as its parent-death signal (it dies with p2prun), and
    // with *nofile as its RLIMIT_NOFILE when given (p2prun's own was raised).
    // Returns 0, or the errno of the failure (ENOENT when the program cannot
    // be found: the exec error is reported, no process is left).
    int spawn(const std::vector<std::string> &argv, const std::vector<std::string> &env,
              int out_fd, int err_fd, const struct rlimit *nofile = nullptr);

    // The last spawn failed in fork() (a process limit, no memory), not in
    // the program's exec.
    bool fork_failed() const { return fork_failed_; }
    pid_t pid() const { return pid_; }
    bool running() const { return pid_ > 0 && !reaped_; }
    bool reaped() const { return reaped_; }
    int wait_status() const { return status_; }

    // The caller reaped pid() (waitpid) and got `status`. others_in_group:
    // whether other processes were in the group just before, while the
    // unreaped rank still held its pid. Once reaped, the group id is only
    // safe to signal while members are left: the kernel may give an empty
    // group's id to an unrelated process (a new group leader).
    void set_reaped(int status, bool others_in_group);

    // The rank was reaped and its group has no member left (the caller looked
    // in /proc); the group is never signalled again.
    void set_group_empty() { group_gone_ = true; }

    // Sends sig to every process of the group (the rank and whatever it
    // started that stayed in the group). No-op once the group is gone.
    void signal_group(int sig);

    // Whether processes may be left in the group: the rank runs (or is an
    // unreaped zombie), or it was reaped and the group is not known empty.
    bool group_alive() const { return pid_ > 0 && !group_gone_; }

private:
    pid_t pid_ = -1;  // also the process group id
    bool fork_failed_ = false;
    bool reaped_ = false;
    bool group_gone_ = false;
    int status_ = 0;
};

// Each rank needs two pipe ends open in p2prun; raise the soft limit if needed.
// *raised: whether it was; *saved then holds the limit to give the ranks
// (ChildProcess::start's nofile). False with *error when it cannot be.
bool ensure_fd_limit(int nranks, std::string *error, bool *raised, struct rlimit *saved);

// Exit code of a wait status: the exit status, or 128+signal when killed.
int exit_code_of(int wait_status);

// "exited with status 3" / "killed by signal 9 (Killed)".
std::string describe_wait_status(int wait_status);

} // namespace p2prun

#endif
