/*
 * Test helper for cma::process_gone: the main thread ends with
 * pthread_exit while a second thread waits for end of file on stdin, then
 * ends the process with _exit(0). Between the two the process is a zombie
 * leader with a live thread: alive.
 */
#include <pthread.h>
#include <unistd.h>

namespace {

void *wait_for_eof(void *) {
    char c;
    while (read(0, &c, 1) > 0) {
    }
    _exit(0);
}

} // namespace

int main() {
    pthread_t t;
    if (pthread_create(&t, nullptr, wait_for_eof, nullptr) != 0) return 1;
    pthread_exit(nullptr);
}
