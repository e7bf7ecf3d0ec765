// p2prun: starts the ranks and runs the event loop that relays their output,
// reaps them, forwards signals and enforces the timeout and kill policy.
#ifndef P2PRUN_LAUNCHER_H
#define P2PRUN_LAUNCHER_H

#include "child_process.h"
#include "line_relay.h"
#include "options.h"
#include "output_sink.h"
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

    // The signal that ended the job and set the exit status (128+signal);
    // 0 when none did. p2prun ends by it once the Launcher is gone.
    int exit_signal() const { return exit_signal_; }

private:
    using Clock = std::chrono::steady_clock;

    struct Stream {
        UniqueFd fd;  // read end of the rank's pipe; closed at end of file
        LineRelay relay;
        Stream(OutputSink *sink, const std::string &prefix) : relay(sink, prefix) {}
    };
    struct Rank {
        Stream out;
        Stream err;
        ChildProcess proc;  // declared last: destroyed (killed, reaped) first
        Rank(OutputSink *out_sink, OutputSink *err_sink, const std::string &prefix)
            : out(out_sink, prefix), err(err_sink, prefix) {}
    };

    enum class Phase { kRunning, kTermSent, kKillSent };

    // Queues "p2prun: <msg>\n" on stderr, after what the ranks wrote.
    void say(const std::string &msg);
    bool prepare(std::string *error);
    bool start_ranks();
    void event_loop();
    void reap();
    void reap_ranks();
    // running: the job had not begun to end when this rank's batch was
    // reaped (its failure is its own, not p2prun's SIGTERM).
    void on_rank_exit(int rank, int status, bool running);
    bool sent_to_ranks(int sig) const;
    void on_reader_gone();
    void on_write_failed();
    void on_signal(const Received &sig);
    // Reads one chunk; true when data came (more may follow).
    bool read_stream(Stream *s);
    void begin_termination();
    // why: what cut the grace short, or "after N s" ("ranks still running <why>").
    void escalate_to_kill(const std::string &why);
    void signal_all(int sig);
    bool all_reaped() const;
    // Marks the groups of reaped ranks that /proc shows empty.
    void refresh_groups();
    bool any_group_alive();
    bool all_groups_gone();
    void close_streams();
    bool output_pending() const;
    bool output_blocked() const;
    // Writes what the fds take now; what they do not is dropped (reported).
    void finish_output();
    size_t open_streams() const;
    void set_exit_code(int code);
    int poll_timeout_ms(Clock::time_point now, bool leaders_done) const;

    Options opts_;
    SignalPipe signals_;
    OutputSink out_{1};  // before ranks_: the relays point here
    OutputSink err_{2};
    // Where stderr lines go: err_, or out_ when fds 1 and 2 are one file
    // (`2>&1`): two queues would each cut their writes to PIPE_BUF without
    // regard to lines, and tear each other's lines in between.
    OutputSink *errs_ = OutputSink::same_file(1, 2) ? &out_ : &err_;
    std::vector<std::unique_ptr<Rank>> ranks_;  // after signals_: destroyed first
    std::unordered_map<pid_t, int> rank_of_pid_;  // ranks not reaped yet
    Phase phase_ = Phase::kRunning;
    int exit_code_ = -1;  // set once, by the first failure, signal or timeout
    int exit_signal_ = 0;  // what p2prun dies of: the first user signal that ends the job, or SIGPIPE
    int user_signals_ = 0;
    Received last_user_signal_{};  // the last one that ends the job
    // RLIMIT_NOFILE as p2prun got it, for the ranks, when p2prun raised its own.
    bool nofile_raised_ = false;
    struct rlimit rank_nofile_ {};
    bool term_sent_ = false;  // SIGTERM went to all groups
    uint64_t sent_signals_ = 0;  // bit n: signal n went to the ranks' groups
    bool have_timeout_ = false;
    Clock::time_point timeout_at_{};
    Clock::time_point kill_at_{};     // phase kTermSent: when SIGKILL follows
    Clock::time_point give_up_at_{};  // phase kKillSent: stop waiting
    bool reader_gone_ = false;  // p2prun's stdout reader went away
    bool write_failed_ = false;  // a write error on stdout or stderr was reported
    bool stopping_ = false;  // timeout or a signal: output is not waited for
    bool have_output_deadline_ = false;
    Clock::time_point output_deadline_{};
    bool drain_started_ = false;
    Clock::time_point drain_until_{};  // after all ranks are gone
};

// Writes "p2prun: <msg>\n" to stderr in one write.
void report(const std::string &msg);

} // namespace p2prun

#endif
