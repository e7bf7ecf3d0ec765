// p2prun: command line of the local launcher.
#ifndef P2PRUN_OPTIONS_H
#define P2PRUN_OPTIONS_H

#include <string>
#include <utility>
#include <vector>

namespace p2prun {

constexpr int kMaxRanks = 1024;

struct Options {
    int nranks = 0;
    int master_port = 0;           // 0: pick a free loopback port
    double grace_s = 3.0;          // SIGTERM -> SIGKILL delay
    double timeout_s = 0.0;        // 0: no timeout
    bool keep_going = false;
    bool prefix = true;
    std::vector<std::pair<std::string, std::string>> env;  // from -x
    std::vector<std::string> argv;  // program and its arguments
};

enum class ParseResult { kRun, kHelp, kError };

// Parses argv[1..argc-1]. On kError, *error holds a one-line message (without
// the "p2prun: " prefix). The first argument that is not an option (or the one
// after "--") starts the program; everything after it belongs to the program.
ParseResult parse_options(int argc, const char *const *argv, Options *opts,
                          std::string *error);

// The usage text (several lines, ends with a newline).
std::string usage_text();

} // namespace p2prun

#endif
