#include "line_relay.h"

#include <cstring>

namespace p2prun {

void LineRelay::emit(const char *line, size_t len, bool add_newline) {
    batch_ += prefix_;
    batch_.append(line, len);
    if (add_newline) {
        batch_ += '\n';
    }
}

void LineRelay::feed(const char *data, size_t len) {
    batch_.clear();
    if (just_split_ && len > 0) {
        just_split_ = false;
        if (*data == '\n') {  // the rest of the cut line was empty
            ++data;
            --len;
        }
    }
    while (len > 0) {
        const char *nl = static_cast<const char *>(std::memchr(data, '\n', len));
        if (nl == nullptr) {
            partial_.append(data, len);
            if (partial_.size() >= kMaxLine) {
                // Unprefixed output passes through byte for byte.
                emit(partial_.data(), partial_.size(), !prefix_.empty());
                partial_.clear();
                just_split_ = !prefix_.empty();
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
    if (!batch_.empty()) {
        out_->append(batch_);
        batch_.clear();
    }
}

void LineRelay::finish() {
    if (partial_.empty()) {
        return;
    }
    batch_.clear();
    emit(partial_.data(), partial_.size(), !prefix_.empty());
    partial_.clear();
    out_->append(batch_);
    batch_.clear();
}

} // namespace p2prun
