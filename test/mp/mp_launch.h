/*
 * Starting p2prun from a gtest driver: one child process (its own process
 * group) whose stdout+stderr come back through a pipe, read line by line
 * with deadlines. The destructor kills the whole group if it still runs.
 */
#ifndef UCXP2P_TEST_MP_LAUNCH_H
#define UCXP2P_TEST_MP_LAUNCH_H

#include <string>
#include <sys/types.h>
#include <vector>

namespace mptest {

class Launch {
public:
    /** fork + exec argv[0] with argv (PATH not searched). */
    explicit Launch(const std::vector<std::string> &argv);
    ~Launch();
    Launch(const Launch &) = delete;
    Launch &operator=(const Launch &) = delete;

    bool started() const { return pid_ > 0; }
    pid_t pid() const { return pid_; }
    /** Next complete output line; false on EOF or when timeout_s passed. */
    bool read_line(std::string *line, double timeout_s);
    /**
     * Read the rest of the output and reap the child. Returns its exit code,
     * 128+signal when killed by a signal, or -1 when it did not end within
     * timeout_s (it is then killed).
     */
    int wait(double timeout_s);
    /** Everything the child printed so far. */
    const std::string &output() const { return all_; }

private:
    bool fill(double timeout_s); // read more; false on EOF/timeout
    void kill_group();

    pid_t pid_ = -1;
    int fd_ = -1;
    bool eof_ = false;
    int status_ = -2; // -2: not reaped yet
    std::string all_, pending_;
};

/** utime + stime of a process in clock ticks (all threads); -1 if gone. */
long long cpu_ticks(pid_t pid);

} // namespace mptest

#endif
