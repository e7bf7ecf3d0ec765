// p2prun: starts the ranks and runs the event loop that relays their output,
// reaps them, forwards signals and enforces the timeout and kill policy.
#ifndef P2PRUN_LAUNCHER_H
#define P2PRUN_LAUNCHER_H

#include "child_process.h"
#include "line_relay.h"
#include "options.h"
#include "signal_pipe.h"
#include "unique_fd.h"

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace p2prun {

class Launcher {
public:
    explicit Launcher(Options opts) : opts_(std::move(opts)) {}
    Launcher(const Launcher &) = delete;
    Launcher &operator=(const Launcher &) = delete;

    // Runs the job to completion; returns p2prun's exit status.
    int run();

private:
    using Clock = std::chrono::steady_clock;

    struct Stream {
        UniqueFd fd;  // read end of the rank's pipe; closed at end of file
        LineRelay relay;
        Stream(int out_fd, const std::string &prefix) : relay(out_fd, prefix) {}
    };
    struct Rank {
        Stream out;
        Stream err;
        ChildProcess proc;  // declared last: destroyed (killed, reaped) first
        Rank(const std::string &prefix) : out(1, prefix), err(2, prefix) {}
    };

    enum class Phase { kRunning, kTermSent, kKillSent };

    bool prepare(std::string *error);
    bool start_ranks();
    void event_loop();
    void reap();
    void reap_ranks();
    void on_rank_exit(int rank, int status);
    void on_signal(int signo);
    // Reads one chunk; true when data came (more may follow).
    bool read_stream(Stream *s);
    void begin_termination();
    void escalate_to_kill();
    void signal_all(int sig);
    bool all_reaped() const;
    // Marks the groups of reaped ranks that /proc shows empty.
    void refresh_groups();
    bool any_group_alive();
    size_t open_streams() const;
    void set_exit_code(int code);
    int poll_timeout_ms(Clock::time_point now, bool leaders_done) const;

    Options opts_;
    SignalPipe signals_;
    std::vector<std::unique_ptr<Rank>> ranks_;  // after signals_: destroyed first
    std::unordered_map<pid_t, int> rank_of_pid_;  // ranks not reaped yet
    Phase phase_ = Phase::kRunning;
    int exit_code_ = -1;  // set once, by the first failure, signal or timeout
    int user_signals_ = 0;
    bool term_sent_ = false;  // SIGTERM went to all groups
    bool have_timeout_ = false;
    Clock::time_point timeout_at_{};
    Clock::time_point kill_at_{};     // phase kTermSent: when SIGKILL follows
    Clock::time_point give_up_at_{};  // phase kKillSent: stop waiting
    bool drain_started_ = false;
    Clock::time_point drain_until_{};  // after all ranks are gone
};

// Writes "p2prun: <msg>\n" to stderr in one write.
void report(const std::string &msg);

} // namespace p2prun

#endif
