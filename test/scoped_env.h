/* Test helper: set or unset one environment variable for a scope. */
#ifndef UCXP2P_TEST_SCOPED_ENV_H
#define UCXP2P_TEST_SCOPED_ENV_H

#include <cstdlib>
#include <string>

namespace p2ptest {

/** Sets (or unsets, value nullptr) an environment variable for a scope. */
class ScopedEnv {
public:
    ScopedEnv(const char *name, const char *value) : name_(name) {
        const char *old = std::getenv(name);
        had_ = old != nullptr;
        if (had_) old_ = old;
        if (value) setenv(name, value, 1); else unsetenv(name);
    }
    ~ScopedEnv() {
        if (had_) setenv(name_.c_str(), old_.c_str(), 1); else unsetenv(name_.c_str());
    }
    ScopedEnv(const ScopedEnv &) = delete;
    ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
    std::string name_, old_;
    bool had_ = false;
};

} // namespace p2ptest

#endif
