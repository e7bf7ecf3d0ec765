#include "line_relay.h"

#include "unique_fd.h"

#include <cstring>

namespace p2prun {

void LineRelay::emit(const char *line, size_t len, bool add_newline) {
    out_ += prefix_;
    out_.append(line, len);
    if (add_newline) {
        out_ += '\n';
    }
}

void LineRelay::feed(const char *data, size_t len) {
    out_.clear();
    while (len > 0) {
        const char *nl = static_cast<const char *>(std::memchr(data, '\n', len));
        if (nl == nullptr) {
            partial_.append(data, len);
            if (partial_.size() >= kMaxLine) {
                emit(partial_.data(), partial_.size(), true);
                partial_.clear();
            }
            break;
        }
        size_t n = static_cast<size_t>(nl - data) + 1;  // includes '\n'
        if (partial_.empty()) {
            emit(data, n, false);
        } else {
            partial_.append(data, n);
            emit(partial_.data(), partial_.size(), false);
            partial_.clear();
        }
        data += n;
        len -= n;
    }
    if (!out_.empty()) {
        // p2prun's stdout may be closed (EPIPE is ignored): output is dropped
        // then, the ranks keep running.
        (void)write_all(out_fd_, out_.data(), out_.size());
        out_.clear();
    }
}

void LineRelay::finish() {
    if (partial_.empty()) {
        return;
    }
    out_.clear();
    emit(partial_.data(), partial_.size(), !prefix_.empty());
    partial_.clear();
    (void)write_all(out_fd_, out_.data(), out_.size());
    out_.clear();
}

} // namespace p2prun
