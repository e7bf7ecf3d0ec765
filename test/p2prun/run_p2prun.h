// Test helper: runs the built p2prun binary in a child process with stdout and
// stderr captured to files, with a bounded wait.
#ifndef P2PRUN_TEST_RUN_P2PRUN_H
#define P2PRUN_TEST_RUN_P2PRUN_H

#include <sys/types.h>

#include <string>
#include <vector>

namespace p2prun_test {

// Path of the p2prun binary under test ($P2P_TOP_BUILDDIR/tools/p2prun/p2prun).
std::string p2prun_path();
// Path of the signal-recording rank ($P2P_TOP_BUILDDIR/test/p2prun/signal_rank).
std::string signal_rank_path();

// A fresh temporary directory, removed with its contents on destruction.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir &) = delete;
    TempDir &operator=(const TempDir &) = delete;
    const std::string &path() const { return path_; }
    std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

struct Result {
    int code = -1;           // exit status, or 128+signal
    bool timed_out = false;  // p2prun itself had to be killed by the test
    std::string out;
    std::string err;
    double seconds = 0;      // wall time from start to exit
};

// One p2prun process. The destructor kills it (SIGKILL) if still running.
class P2prun {
public:
    // args: p2prun's arguments (without argv[0]); env: extra NAME=VALUE set
    // (or NAME= with empty value) in p2prun's environment; unset: names removed.
    // stdout_fd: p2prun's stdout when >= 0 (Result::out is empty then).
    // p2prun starts with the signals it handles at their defaults, except
    // those in ignored (SIG_IGN). own_group: p2prun runs in a process group
    // of its own, as a shell with job control starts a job (then SIGTSTP
    // stops it: its group is not orphaned, the test is its parent).
    P2prun(const TempDir &dir, const std::vector<std::string> &args,
           const std::vector<std::string> &env = {},
           const std::vector<std::string> &unset = {}, int stdout_fd = -1,
           const std::vector<int> &ignored = {}, bool own_group = false);
    ~P2prun();
    P2prun(const P2prun &) = delete;
    P2prun &operator=(const P2prun &) = delete;

    pid_t pid() const { return pid_; }
    // What p2prun wrote to stderr so far.
    std::string err_so_far() const;
    // Waits at most deadline_s seconds for text in p2prun's stderr.
    bool wait_for_err(const std::string &text, double deadline_s) const;
    // Waits at most deadline_s seconds for p2prun to exit.
    Result wait(double deadline_s = 20);

private:
    pid_t pid_ = -1;
    std::string out_path_, err_path_;
    double start_ = 0;
};

// p2prun's stdout is a pipe that the test reads only when told to.
struct StdoutPipe {
    int r = -1, w = -1;
    StdoutPipe();
    ~StdoutPipe();
    void close_write();  // the test's copy, once p2prun has its own
    void close_read();   // the reader goes away (`| head`)
    size_t count_lines();  // until end of file
};

// Runs p2prun to completion (bounded).
Result run(const TempDir &dir, const std::vector<std::string> &args,
           const std::vector<std::string> &env = {}, double deadline_s = 20);

double now_s();
std::string read_file(const std::string &path);
bool file_exists(const std::string &path);
// Waits (bounded) until all the files exist; false on deadline.
bool wait_for_files(const std::vector<std::string> &paths, double deadline_s);
// True when the process is gone or a zombie (not running).
bool process_gone(pid_t pid);
// The pid written in path, or -1 if it is empty or missing.
pid_t read_pid(const std::string &path);
// The state letter of /proc/PID/stat ('R', 'S', 'T' when stopped, ...);
// 0 when the process is gone.
char process_state(pid_t pid);
std::vector<std::string> split_lines(const std::string &text);

} // namespace p2prun_test

#endif
