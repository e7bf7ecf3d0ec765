/*
 * A plain program (no ucxp2p header, built with the OLD libstdc++ string
 * ABI) that dlopen()s libucxp2p_herring.so with RTLD_NOW: every undefined
 * symbol of the shim must resolve at once. It then looks up each vendor
 * symbol, checks an internal one stays hidden, and calls the old-ABI
 * herringP2PGetRDMADevices and herringLocalDevice through dlsym.
 *
 *   herring_dlopen SHIM.so SYMBOLS-FILE EXPECTED-DEVICES ("-" for none)
 */
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#if _GLIBCXX_USE_CXX11_ABI != 0
#error "herring_dlopen is built with -D_GLIBCXX_USE_CXX11_ABI=0"
#endif

static int fail(const char *what, const std::string &detail) {
    std::fprintf(stderr, "herring_dlopen: FAILED %s: %s\n", what, detail.c_str());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        std::fprintf(stderr, "usage: %s SHIM.so SYMBOLS-FILE EXPECTED-DEVICES "
                     "[EXPECTED-LOCAL-DEVICE]\n", argv[0]);
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
        return fail("dlopen RTLD_NOW", dlerror());
    }
    std::ifstream symbols(argv[2]);
    std::string name;
    int count = 0;
    while (std::getline(symbols, name)) {
        if (name.empty()) continue;
        if (dlsym(h, name.c_str()) == nullptr) {
            return fail("dlsym", name);
        }
        ++count;
    }
    if (count != 10) {
        return fail("symbols file", std::to_string(count) + " names, want 10");
    }
    // Internals stay hidden (visibility + version script).
    if (dlsym(h, "_ZN7herring10initializeEv") != nullptr ||
        dlsym(h, "_ZN7herring10map_statusE12p2p_status_t") != nullptr) {
        return fail("hidden internals", "herring:: symbol visible");
    }
    using devices_fn = void (*)(std::vector<std::string> &);
    auto devices = reinterpret_cast<devices_fn>(
        dlsym(h, "_Z24herringP2PGetRDMADevicesRSt6vectorISsSaISsEE"));
    std::vector<std::string> list{"stale"};
    devices(list);
    std::string joined;
    for (const std::string &d : list) joined += (joined.empty() ? "" : ",") + d;
    if (joined.empty()) joined = "-";
    if (joined != argv[3]) {
        return fail("old-ABI herringP2PGetRDMADevices", joined + ", want " + argv[3]);
    }
    auto local_device = reinterpret_cast<int (*)()>(dlsym(h, "_Z18herringLocalDevicev"));
    int dev = local_device();
    const int want_dev = argc == 5 ? std::atoi(argv[4]) : 0;
    if (dev != want_dev) {
        return fail("herringLocalDevice before Initialize",
                    std::to_string(dev) + ", want " + std::to_string(want_dev));
    }
    if (dlclose(h) != 0) {
        return fail("dlclose", dlerror());
    }
    std::printf("herring_dlopen OK: %d symbols, devices %s\n", count, joined.c_str());
    return 0;
}
