/*
 * An array of n elements on the stack when n is at most N, on the heap
 * otherwise: the per-call scratch of the batch posts (items, endpoints),
 * which must not allocate for the common batch sizes.
 */
#ifndef UCXP2P_CORE_STACK_BUF_H
#define UCXP2P_CORE_STACK_BUF_H

#include <cstddef>
#include <memory>

namespace ucxp2p {

template <class T, size_t N> class StackBuf {
public:
    explicit StackBuf(size_t n) : data_(local_) {
        if (n > N) {
            heap_.reset(new T[n]);
            data_ = heap_.get();
        }
    }
    StackBuf(const StackBuf &) = delete;
    StackBuf &operator=(const StackBuf &) = delete;

    T *data() { return data_; }
    T &operator[](size_t i) { return data_[i]; }

private:
    T local_[N];
    std::unique_ptr<T[]> heap_;
    T *data_;
};

} // namespace ucxp2p

#endif
