// p2prun: one of p2prun's own output streams (stdout, stderr), written without
// ever blocking the event loop. Output queues here and goes out as the fd
// takes it; while more than kLimit bytes wait, the launcher stops reading the
// ranks' pipes (so a stalled reader slows the ranks down, nothing is lost)
// but still handles signals, the timeout and the kill policy.
#ifndef P2PRUN_OUTPUT_SINK_H
#define P2PRUN_OUTPUT_SINK_H

#include <cstddef>
#include <cerrno>
#include <string>

namespace p2prun {

class OutputSink {
public:
    static constexpr size_t kLimit = 1 << 20;

    // fd: not owned; left blocking or not as it is (its open file
    // description is shared with other processes, such as the shell).
    explicit OutputSink(int fd);
    OutputSink(const OutputSink &) = delete;
    OutputSink &operator=(const OutputSink &) = delete;

    int fd() const { return fd_; }

    // Whether fds a and b are the same file (device and inode), such as
    // stdout and stderr after `2>&1`.
    static bool same_file(int a, int b);

    // Queues data; dropped once the fd failed (EPIPE: nobody reads any more).
    void append(const char *data, size_t len);
    void append(const std::string &s) { append(s.data(), s.size()); }

    size_t pending() const { return buf_.size() - off_; }
    bool full() const { return pending() >= kLimit; }

    // Writes as much as the fd takes now: each write is one the fd reported
    // room for (poll), of at most PIPE_BUF bytes unless the fd is a socket
    // (sent with MSG_DONTWAIT) or a regular file, so it cannot block.
    void flush();

    // Drops what waits; returns how many bytes that was.
    size_t discard();

    // The reader closed its end (EPIPE, ECONNRESET): what comes is dropped.
    bool reader_gone() const { return broken_ && (error_ == EPIPE || error_ == ECONNRESET); }
    // Any other write error (ENOSPC, EBADF, EIO): what comes is dropped too;
    // error() says why.
    bool write_failed() const { return broken_ && !reader_gone(); }
    int error() const { return error_; }

private:
    // One write that does not block; bytes written, 0 when the fd has no
    // room, -1 on error.
    long write_once(const char *data, size_t len);

    int fd_;
    bool socket_ = false;
    bool regular_ = false;
    bool broken_ = false;
    int error_ = 0;  // errno of the write that broke it
    std::string buf_;
    size_t off_ = 0;  // start of what waits in buf_
};

} // namespace p2prun

#endif
