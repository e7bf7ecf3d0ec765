#include "json_on_signal.h"

#include "doc_out.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <unistd.h>

namespace perftest {
namespace json_on_signal {

namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGHUP};

/* Two slots: keep() (the reporting thread) fills the one it did not fill
 * last, then publishes it with one store; a handler reads the published
 * one. Once a handler runs, keep() touches no slot again. */
struct Slot {
    char *text = nullptr;
    size_t len = 0;
};
Slot g_slots[2];
int g_last = -1;                  // keep()'s thread only
std::atomic<int> g_active{-1};    // -1: nothing to print
enum State : int { kRunning, kHandlerPrints, kFinal };
std::atomic<int> g_state{kRunning};
std::atomic<bool> g_final_out{false};  // print_final wrote its document
bool g_installed = false;

void write_all(const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = ::write(doc_out::fd(), p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        p += w;
        n -= static_cast<size_t>(w);
    }
}

void die_of(int sig) {
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, nullptr);
    raise(sig);  // blocked until the handler returns, then ends the process
}

/* Any thread may take the signal (the progress thread among them), and
 * two threads may take two. Only async-signal-safe calls. */
void on_signal(int sig) {
    int seen = kRunning;
    if (g_state.compare_exchange_strong(seen, kHandlerPrints)) {
        const int i = g_active.load();
        if (i >= 0) write_all(g_slots[i].text, g_slots[i].len);
    } else if (seen == kFinal) {
        // The final document is going out: let it finish (up to 5 s: a
        // reader that stopped reading must not keep us alive), then end.
        for (int ms = 0; ms < 5000 && !g_final_out.load(); ++ms) {
            struct timespec one = {0, 1000000};
            nanosleep(&one, nullptr);
        }
    } else {
        return;  // another handler prints, and then ends the process
    }
    die_of(sig);
}

void install() {
    g_installed = true;
    for (int sig : kSignals) {
        struct sigaction old;
        if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        struct sigaction sa;
        std::memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        for (int other : kSignals) sigaddset(&sa.sa_mask, other);
        sigaction(sig, &sa, nullptr);
    }
}

} // namespace

void keep(const std::string &doc) {
    if (!g_installed) install();
    if (g_state.load() != kRunning) return;  // a handler may read either slot
    const int next = g_last == 0 ? 1 : 0;    // never the published one
    char *copy = static_cast<char *>(std::malloc(doc.size()));
    if (copy == nullptr) return;  // out of memory: the previous one stays
    std::memcpy(copy, doc.data(), doc.size());
    std::free(g_slots[next].text);
    g_slots[next].text = copy;
    g_slots[next].len = doc.size();
    g_last = next;
    g_active.store(next);
}

void forget() {
    g_active.store(-1);  // the slots stay: a handler may be reading one
}

void print_final(const std::string &doc) {
    sigset_t block, old;
    sigemptyset(&block);
    for (int sig : kSignals) sigaddset(&block, sig);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int seen = kRunning;
    if (!g_state.compare_exchange_strong(seen, kFinal)) {
        // A handler (another thread) prints the points so far and then
        // ends the process: wait for that rather than exit meanwhile,
        // which could cut its document short.
        for (;;) pause();
    }
    std::fputs(doc.c_str(), doc_out::stream());
    std::fflush(doc_out::stream());
    g_final_out.store(true);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);  // one that came ends us now
}

} // namespace json_on_signal
} // namespace perftest
