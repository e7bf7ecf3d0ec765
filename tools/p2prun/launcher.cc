#include "launcher.h"

#include "job_env.h"
#include "proc_tree.h"

#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

extern char **environ;

namespace p2prun {

namespace {

// After the last rank exited and its group is empty, how long to keep reading
// pipes still held open by processes that left the group (setsid).
constexpr auto kDrainWindow = std::chrono::milliseconds(500);
// Once the ranks are gone after a timeout or a signal, how long to keep trying
// to write their output to a reader that does not read.
constexpr auto kOutputWindow = std::chrono::seconds(1);
// After SIGKILL, how long to wait for the groups to empty before giving up.
constexpr auto kGiveUpAfterKill = std::chrono::seconds(5);
// How often to look for leftover group members once all ranks exited.
constexpr int kGroupPollMs = 20;
// Rounds of 10 ms to kill what is left at the end (bounded: a process stuck
// in an uninterruptible sleep is left to init rather than hanging p2prun).
constexpr int kGiveUpRounds = 200;

std::chrono::steady_clock::duration seconds(double s) {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(s));
}

std::string format_seconds(double s) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", s);
    return buf;
}

} // namespace

void Launcher::set_exit_code(int code) {
    if (exit_code_ < 0) {
        exit_code_ = code;
    }
}

bool Launcher::prepare(std::string *error) {
    if (!signals_.install(error) ||
        !ensure_fd_limit(opts_.nranks, error, &nofile_raised_, &rank_nofile_)) {
        return false;
    }
#ifdef __linux__
    // Descendants orphaned by a rank's exit are re-parented to p2prun, which
    // reaps them (no zombies left to a container's init).
    (void)::prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif
    return true;
}

bool Launcher::start_ranks() {
    JobInfo job;
    job.world_size = opts_.nranks;
    std::string error;
    job.master_port = opts_.master_port != 0 ? opts_.master_port : pick_free_loopback_port(&error);
    // Another one for MASTER_PORT: PyTorch code in the ranks binds it.
    for (int tries = 0; job.master_port != 0 && tries < 16 &&
                        (job.store_port == 0 || job.store_port == job.master_port);
         ++tries) {
        job.store_port = pick_free_loopback_port(&error);
    }
    if (job.master_port == 0 || job.store_port == 0 || job.store_port == job.master_port) {
        say("cannot pick a master port: " + (error.empty() ? "none free" : error));
        set_exit_code(1);
        return false;
    }
    job.job_token = make_job_token(&error);
    if (job.job_token.empty()) {
        say("cannot make a job token: " + error);
        set_exit_code(1);
        return false;
    }
    for (int r = 0; r < opts_.nranks; ++r) {
        auto rank = std::make_unique<Rank>(&out_, errs_,
                                           opts_.prefix ? "[" + std::to_string(r) + "] " : "");
        UniqueFd out_w, err_w;
        if (!make_pipe(&rank->out.fd, &out_w) || !make_pipe(&rank->err.fd, &err_w) ||
            !set_nonblocking(rank->out.fd.get()) || !set_nonblocking(rank->err.fd.get())) {
            say(std::string("cannot create pipes for rank ") + std::to_string(r) + ": " +
                   std::strerror(errno));
            set_exit_code(1);
            return false;
        }
        int rc = rank->proc.spawn(opts_.argv, rank_environment(environ, job, r, opts_.env),
                                  out_w.get(), err_w.get(),
                                  nofile_raised_ ? &rank_nofile_ : nullptr);
        if (rc != 0 && rank->proc.fork_failed()) {
            say("cannot start rank " + std::to_string(r) + ": fork: " + std::strerror(rc));
            set_exit_code(1);
            return false;
        }
        if (rc != 0) {
            say("cannot run '" + opts_.argv[0] + "': " + std::strerror(rc));
            set_exit_code(127);
            return false;
        }
        rank_of_pid_[rank->proc.pid()] = r;
        ranks_.push_back(std::move(rank));
    }
    return true;
}

bool Launcher::all_reaped() const {
    for (const auto &r : ranks_) {
        if (!r->proc.reaped()) {
            return false;
        }
    }
    return true;
}

void Launcher::refresh_groups() {
    bool look = false;
    for (const auto &r : ranks_) {
        look = look || (r->proc.reaped() && r->proc.group_alive());
    }
    if (!look) {
        return;
    }
    std::set<pid_t> live = groups_with_members(list_descendants());
    for (auto &r : ranks_) {
        if (r->proc.reaped() && live.count(r->proc.pid()) == 0) {
            r->proc.set_group_empty();
        }
    }
}

bool Launcher::any_group_alive() {
    refresh_groups();
    bool alive = false;
    for (const auto &r : ranks_) {
        alive = alive || r->proc.group_alive();
    }
    return alive;
}

size_t Launcher::open_streams() const {
    size_t n = 0;
    for (const auto &r : ranks_) {
        n += r->out.fd.valid() + r->err.fd.valid();
    }
    return n;
}

void Launcher::signal_all(int sig) {
    if (sig > 0 && sig < 64) sent_signals_ |= uint64_t(1) << sig;
    refresh_groups();
    for (auto &r : ranks_) {
        r->proc.signal_group(sig);
    }
}

void Launcher::begin_termination() {
    if (!term_sent_) {
        term_sent_ = true;
        signal_all(SIGTERM);
        // A stopped rank (SIGSTOP, a debugger let go) acts on the TERM only
        // once continued: without this it waited for the grace period's
        // SIGKILL.
        signal_all(SIGCONT);
    }
    if (phase_ == Phase::kRunning) {
        phase_ = Phase::kTermSent;
        kill_at_ = Clock::now() + seconds(opts_.grace_s);
    }
}

bool Launcher::all_groups_gone() {
    return all_reaped() && !any_group_alive();
}

void Launcher::escalate_to_kill(const std::string &why) {
    if (phase_ == Phase::kKillSent) {
        return;
    }
    if (!all_reaped()) {
        say("ranks still running " + why + ", sending SIGKILL");
    }
    phase_ = Phase::kKillSent;
    signal_all(SIGKILL);
    give_up_at_ = Clock::now() + kGiveUpAfterKill;
}

bool Launcher::sent_to_ranks(int sig) const {
    return sig > 0 && sig < 64 && (sent_signals_ & (uint64_t(1) << sig)) != 0;
}

void Launcher::on_rank_exit(int rank, int status, bool running) {
    Rank &r = *ranks_[rank];
    // Relay what the rank wrote before it died ahead of the report on it.
    for (Stream *s : {&r.out, &r.err}) {
        for (int i = 0; i < 64 && s->fd.valid() && read_stream(s); ++i) {
        }
    }
    int code = exit_code_of(status);
    // Ranks ending after p2prun started ending the job are not failures of
    // their own -- unless a signal p2prun never sent killed one (a crash
    // while the job was ending is still reported).
    if (code == 0 ||
        (!running && !(WIFSIGNALED(status) && !sent_to_ranks(WTERMSIG(status))))) {
        return;
    }
    say("rank " + std::to_string(rank) + " " + describe_wait_status(status));
    set_exit_code(code);
    if (!opts_.keep_going) {
        begin_termination();
    }
}

void Launcher::reap() {
    for (;;) {
        // Look before reaping: a rank is reaped only in reap_ranks().
        siginfo_t info;
        std::memset(&info, 0, sizeof(info));
        if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
            if (errno == EINTR) {
                continue;
            }
            return;
        }
        if (info.si_pid == 0) {
            return;
        }
        if (rank_of_pid_.count(info.si_pid) != 0) {
            reap_ranks();
        } else {
            int status = 0;  // an orphaned descendant
            (void)::waitpid(info.si_pid, &status, WNOHANG);
        }
    }
}

void Launcher::reap_ranks() {
    std::vector<pid_t> exited;
    for (const auto &kv : rank_of_pid_) {
        siginfo_t info;
        std::memset(&info, 0, sizeof(info));
        if (::waitid(P_PID, kv.first, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            info.si_pid == kv.first) {
            exited.push_back(kv.first);
        }
    }
    // While the exited ranks are unreaped zombies, their pids -- the ids of
    // their groups -- cannot be reused: whatever /proc shows in those groups
    // now are the ranks' own processes.
    std::set<pid_t> live = groups_with_members(list_descendants());
    struct Exit {
        int rank;
        int status;
    };
    std::vector<Exit> batch;
    for (pid_t pid : exited) {
        int status = 0;
        if (::waitpid(pid, &status, WNOHANG) != pid) {
            continue;  // cannot happen: it was waitable
        }
        auto it = rank_of_pid_.find(pid);
        int rank = it->second;
        rank_of_pid_.erase(it);
        ranks_[rank]->proc.set_reaped(status, live.count(pid) != 0);
        batch.push_back({rank, status});
    }
    // Which of the ranks reaped together ended first is unknown (a busy
    // machine lets several go before p2prun runs). The likeliest cause of
    // the others comes first, so that its status is the job's: a rank
    // killed by a signal (a crash) before one that exited with an error
    // (often a peer's failure seen), then by rank. Every one of them
    // exited before this batch could end the job, so each failure is
    // reported, not only the first.
    auto order = [](const Exit &e) {
        return exit_code_of(e.status) == 0 ? 2 : WIFSIGNALED(e.status) ? 0 : 1;
    };
    std::sort(batch.begin(), batch.end(), [&](const Exit &a, const Exit &b) {
        return order(a) != order(b) ? order(a) < order(b) : a.rank < b.rank;
    });
    const bool running = phase_ == Phase::kRunning;
    for (const Exit &e : batch) {
        on_rank_exit(e.rank, e.status, running);
    }
}

void Launcher::on_signal(const Received &sig) {
    const int signo = sig.signo;
    if (signo == SIGCHLD) {
        reap();
        return;
    }
    if (signo == SIGTSTP) {
        // Ctrl-Z stops only p2prun's group: stop the ranks' groups with it,
        // and resume them when the shell continues p2prun (fg, bg).
        signal_all(SIGTSTP);
        out_.flush();
        err_.flush();
        signals_.stop_self();
        signal_all(SIGCONT);
        return;
    }
    const bool ends_job = signo != SIGUSR1 && signo != SIGUSR2;
    if (ends_job && user_signals_ > 0 && same_request(last_user_signal_, sig)) {
        return;  // one request delivered twice (timeout(1)): not a second signal
    }
    const char *name = ::strsignal(signo);
    say("received signal " + std::to_string(signo) + " (" + (name ? name : "?") +
           "), forwarding it to the ranks");
    signal_all(signo);
    if (!ends_job) {
        return;  // meant for the ranks (a dump, a checkpoint): the job goes on
    }
    ++user_signals_;
    last_user_signal_ = sig;
    stopping_ = true;
    // p2prun ends by the first such signal even after a rank failed (its
    // status was reported): a shell stops a script on Ctrl-C only when the
    // job it waited for died of SIGINT.
    if (user_signals_ == 1) {
        exit_signal_ = signo;
    }
    set_exit_code(128 + signo);
    bool first = phase_ == Phase::kRunning;
    if (signo == SIGQUIT) {
        // The ranks may only dump (core, threads) on SIGQUIT: end them as
        // on SIGTERM.
        begin_termination();
    } else {
        term_sent_ = term_sent_ || signo == SIGTERM;
        if (first) {
            phase_ = Phase::kTermSent;
            kill_at_ = Clock::now() + seconds(opts_.grace_s);
        }
    }
    if (!first && user_signals_ > 1) {
        escalate_to_kill("on a second signal");  // do not wait for the grace period
    }
}

bool Launcher::read_stream(Stream *s) {
    static char buf[65536];
    for (;;) {
        ssize_t n = ::read(s->fd.get(), buf, sizeof(buf));
        if (n > 0) {
            s->relay.feed(buf, static_cast<size_t>(n));
            return true;  // one chunk per wake-up keeps the ranks fair
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno == EAGAIN) {
            return false;
        }
        s->relay.finish();  // end of file or read error
        s->fd.reset();
        return false;
    }
}

int Launcher::poll_timeout_ms(Clock::time_point now, bool leaders_done) const {
    Clock::time_point next = Clock::time_point::max();
    if (have_timeout_ && (!leaders_done || output_pending())) {
        next = std::min(next, timeout_at_);
    }
    if (have_output_deadline_) {
        next = std::min(next, output_deadline_);
    }
    if (phase_ == Phase::kTermSent) {
        next = std::min(next, kill_at_);
    } else if (phase_ == Phase::kKillSent) {
        next = std::min(next, give_up_at_);
    }
    if (drain_started_) {
        next = std::min(next, drain_until_);
    }
    int ms = -1;
    if (next != Clock::time_point::max()) {
        auto d = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
        ms = d < 0 ? 0 : static_cast<int>(std::min<long long>(d + 1, 60000));
    }
    if (leaders_done && !drain_started_ && (ms < 0 || ms > kGroupPollMs)) {
        ms = kGroupPollMs;
    }
    return ms;
}

void Launcher::event_loop() {
    if (opts_.timeout_s > 0) {
        have_timeout_ = true;
        timeout_at_ = Clock::now() + seconds(opts_.timeout_s);
    }
    std::vector<pollfd> fds;
    std::vector<Stream *> streams;
    for (;;) {
        reap();  // cheap, and covers a SIGCHLD that raced with a previous wait
        Clock::time_point now = Clock::now();
        bool leaders_done = all_reaped();
        if (leaders_done && !drain_started_) {
            // Kill what the ranks left behind in their groups (a forwarded
            // SIGINT, say, may not have ended a rank's background job),
            // then drain.
            if (any_group_alive()) {
                begin_termination();
            } else {
                drain_started_ = true;
                drain_until_ = now + kDrainWindow;
            }
        }
        if (drain_started_) {
            if (!stopping_ && output_blocked()) {
                drain_until_ = now + kDrainWindow;  // waiting on our reader, not on them
            }
            if (open_streams() == 0 || now >= drain_until_) {
                close_streams();
                if (!output_pending()) {
                    break;
                }
                if (stopping_ && !have_output_deadline_) {
                    have_output_deadline_ = true;
                    output_deadline_ = now + kOutputWindow;
                }
            }
        }
        if (have_output_deadline_ && now >= output_deadline_) {
            break;
        }
        if (have_timeout_ && (!leaders_done || output_pending()) && now >= timeout_at_) {
            have_timeout_ = false;
            stopping_ = true;
            say("timeout after " + format_seconds(opts_.timeout_s) + " s");
            set_exit_code(124);
            if (!leaders_done) {
                begin_termination();
            }
        }
        if (phase_ == Phase::kTermSent && now >= kill_at_) {
            escalate_to_kill("after " + format_seconds(opts_.grace_s) + " s");
        } else if (phase_ == Phase::kKillSent && now >= give_up_at_) {
            if (!all_groups_gone()) {
                say("some rank processes did not die after SIGKILL; giving up on them");
                break;
            }
            give_up_at_ = Clock::time_point::max();  // only output is left
        }

        fds.clear();
        streams.clear();
        fds.push_back({signals_.fd(), POLLIN, 0});
        streams.push_back(nullptr);
        for (OutputSink *o : {&out_, &err_}) {
            // Not polled while nothing waits: a closed reader's POLLERR
            // would wake the loop at once.
            fds.push_back({o->pending() > 0 ? o->fd() : -1, POLLOUT, 0});
            streams.push_back(nullptr);
        }
        for (auto &r : ranks_) {
            for (Stream *s : {&r->out, &r->err}) {
                if (s->fd.valid() && !s->relay.sink()->full()) {  // else backpressure
                    fds.push_back({s->fd.get(), POLLIN, 0});
                    streams.push_back(s);
                }
            }
        }
        int rc = ::poll(fds.data(), fds.size(), poll_timeout_ms(now, leaders_done));
        if (rc < 0) {
            if (errno == EINTR) {
                continue;
            }
            say(std::string("poll: ") + std::strerror(errno));
            set_exit_code(1);
            begin_termination();
            escalate_to_kill("after a poll error");
            break;
        }
        for (size_t i = 3; i < fds.size(); ++i) {
            if (fds[i].revents != 0) {
                read_stream(streams[i]);
            }
        }
        out_.flush();
        err_.flush();
        if (!reader_gone_ && out_.reader_gone()) {
            on_reader_gone();
        }
        if (!write_failed_ && (out_.write_failed() || err_.write_failed())) {
            on_write_failed();
        }
        if (fds[0].revents != 0) {
            for (const Received &sig : signals_.drain()) {
                on_signal(sig);
            }
        }
    }
    close_streams();
    finish_output();
}

int Launcher::run() {
    std::string error;
    if (!prepare(&error)) {
        report(error);
        return 1;
    }
    if (!start_ranks()) {
        begin_termination();  // the ranks already started
    }
    event_loop();
    signal_all(SIGKILL);  // what is left of the groups of reaped ranks
    ranks_.clear();  // kills and reaps the ranks left, while handlers are set
    rank_of_pid_.clear();
    // p2prun is the subreaper of what the ranks started: none of it, in
    // their groups or not (setsid), outlives the job.
    (void)kill_descendants(kGiveUpRounds);
    return exit_code_ < 0 ? 0 : exit_code_;
}

} // namespace p2prun
