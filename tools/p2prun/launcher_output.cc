// The launcher's output side: where the ranks' relayed output goes, and what
// the job does when it cannot go there (a full disk, a reader that left).
#include "launcher.h"

#include <csignal>
#include <cstring>

namespace p2prun {

void report(const std::string &msg) {
    std::string line = "p2prun: " + msg + "\n";
    (void)write_all(2, line.data(), line.size());
}

void Launcher::say(const std::string &msg) {
    errs_->append("p2prun: " + msg + "\n");
}

void Launcher::on_write_failed() {
    // As `echo > /dev/full` fails: the ranks' output is lost, so the job
    // cannot report success. It runs on (its work may matter more than its
    // output); the message goes to whichever stream still takes it.
    write_failed_ = true;
    const bool out_failed = out_.write_failed();
    const std::string msg = std::string("p2prun: cannot write to ") +
                            (out_failed ? "stdout" : "stderr") + ": " +
                            std::strerror(out_failed ? out_.error() : err_.error()) +
                            "; the ranks' output there is lost\n";
    OutputSink *other = out_failed ? &err_ : &out_;
    if (!other->write_failed()) other->append(msg);
    set_exit_code(1);
}

void Launcher::on_reader_gone() {
    reader_gone_ = true;
    if (all_reaped()) {
        return;  // the job is over: only its last output is lost
    }
    // `p2prun ... | head`: as a program writing there would die of SIGPIPE,
    // the job ends (the ranks never write to that pipe themselves).
    say("stdout closed by its reader, ending the job");
    stopping_ = true;
    if (exit_code_ < 0) {
        exit_signal_ = SIGPIPE;
    }
    set_exit_code(128 + SIGPIPE);
    begin_termination();
}

void Launcher::close_streams() {
    // Queue what is buffered of streams that never reached end of file.
    for (auto &r : ranks_) {
        for (Stream *s : {&r->out, &r->err}) {
            if (s->fd.valid()) {
                s->relay.finish();
                s->fd.reset();
            }
        }
    }
}

bool Launcher::output_pending() const {
    return out_.pending() > 0 || err_.pending() > 0;
}

bool Launcher::output_blocked() const {
    return out_.full() || err_.full();
}

void Launcher::finish_output() {
    out_.flush();
    err_.flush();
    size_t dropped = out_.discard() + err_.discard();
    if (dropped > 0) {
        say(std::to_string(dropped) + " bytes of output dropped: not read in time");
        errs_->flush();  // if stderr takes it
        errs_->discard();
    }
}

} // namespace p2prun
