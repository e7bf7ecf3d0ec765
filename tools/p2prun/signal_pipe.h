// p2prun: turns SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGALRM, SIGUSR1,
// SIGUSR2 and SIGTSTP into bytes on a pipe that the event loop polls (the self-pipe
// pattern), and ignores SIGPIPE. A signal other than SIGCHLD that was ignored
// when p2prun started (nohup, a script's `&`) stays ignored, and the ranks
// inherit that. The old dispositions come back when the object is destroyed.
// Each signal comes with its sender and the time it arrived, so that one
// request delivered twice can be told from a second request (same_request).
#ifndef P2PRUN_SIGNAL_PIPE_H
#define P2PRUN_SIGNAL_PIPE_H

#include "unique_fd.h"

#include <signal.h>
#include <sys/types.h>

#include <cstdint>

#include <string>
#include <utility>
#include <vector>

namespace p2prun {

// One signal as p2prun's handler received it.
struct Received {
    int signo = 0;
    pid_t sender = 0;   // the process that sent it (kill, sigqueue); 0: the kernel (a tty)
    int64_t at_ns = 0;  // CLOCK_MONOTONIC on arrival
};

// How close two arrivals of one request are at most (see same_request).
constexpr int64_t kRepeatWindowNs = 1000000000;

// Whether cur repeats prev's request rather than being a second one: the
// same signal from the same process within kRepeatWindowNs. timeout(1)
// does this: it signals p2prun, then its own process group, which
// p2prun is part of. A second Ctrl-C (sent by the kernel) or a second
// `kill` command (another process) is a second request.
bool same_request(const Received &prev, const Received &cur);

class SignalPipe {
public:
    SignalPipe() = default;
    ~SignalPipe();
    SignalPipe(const SignalPipe &) = delete;
    SignalPipe &operator=(const SignalPipe &) = delete;

    // Installs the handlers; only one SignalPipe may be installed at a time.
    bool install(std::string *error);

    // Read end to poll for POLLIN.
    int fd() const { return read_end_.get(); }

    // Drains the pipe; returns the signals received, in order.
    std::vector<Received> drain();

    // Stops p2prun as SIGTSTP does by default (not in an orphaned process
    // group); returns once it is continued.
    void stop_self();

    // Signals whose disposition children must get back to default (p2prun
    // ignores or catches them; not those inherited ignored); for
    // posix_spawn's SETSIGDEF.
    static void spawn_default_set(sigset_t *set);

private:
    static void handler(int signo, siginfo_t *info, void *context);

    UniqueFd read_end_;
    UniqueFd write_end_;
    bool installed_ = false;
    // Bytes of a record a read cut (the writer writes whole records).
    unsigned char partial_[sizeof(Received)] = {};
    size_t partial_len_ = 0;
    std::vector<std::pair<int, struct sigaction>> saved_;
};

} // namespace p2prun

#endif
