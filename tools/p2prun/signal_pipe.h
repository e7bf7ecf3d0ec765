// p2prun: turns SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGALRM, SIGUSR1,
// SIGUSR2 and SIGTSTP into bytes on a pipe that the event loop polls (the self-pipe
// pattern), and ignores SIGPIPE. A signal other than SIGCHLD that was ignored
// when p2prun started (nohup, a script's `&`) stays ignored, and the ranks
// inherit that. The old dispositions come back when the object is destroyed.
#ifndef P2PRUN_SIGNAL_PIPE_H
#define P2PRUN_SIGNAL_PIPE_H

#include "unique_fd.h"

#include <signal.h>

#include <string>
#include <utility>
#include <vector>

namespace p2prun {

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
    std::vector<int> drain();

    // Stops p2prun as SIGTSTP does by default (not in an orphaned process
    // group); returns once it is continued.
    void stop_self();

    // Signals whose disposition children must get back to default (p2prun
    // ignores or catches them; not those inherited ignored); for
    // posix_spawn's SETSIGDEF.
    static void spawn_default_set(sigset_t *set);

private:
    static void handler(int signo);

    UniqueFd read_end_;
    UniqueFd write_end_;
    bool installed_ = false;
    std::vector<std::pair<int, struct sigaction>> saved_;
};

} // namespace p2prun

#endif
