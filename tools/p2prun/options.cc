#include "options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace p2prun {

namespace {

bool parse_int(const std::string &s, long min, long max, long *out) {
    if (s.empty() || !(s[0] >= '0' && s[0] <= '9')) {
        return false;
    }
    errno = 0;
    char *end = nullptr;
    long v = std::strtol(s.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max) {
        return false;
    }
    *out = v;
    return true;
}

bool parse_seconds(const std::string &s, double *out) {
    // Decimal only: strtod also reads hex ("0x10"), inf and nan.
    if (s.empty() || s.find_first_not_of("0123456789.eE+-") != std::string::npos ||
        !((s[0] >= '0' && s[0] <= '9') || s[0] == '.')) {
        return false;
    }
    errno = 0;
    char *end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    // Upper bound keeps deadline arithmetic far from overflow (~11 days).
    if (errno != 0 || *end != '\0' || !std::isfinite(v) || v < 0 || v > 1e6) {
        return false;
    }
    *out = v;
    return true;
}

bool valid_env_name(const std::string &name) {
    if (name.empty() || (name[0] >= '0' && name[0] <= '9')) {
        return false;
    }
    for (char c : name) {
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                  (c >= '0' && c <= '9') || c == '_';
        if (!ok) {
            return false;
        }
    }
    return true;
}

// Splits "--name=value" into name and value; has_value tells whether '=' was
// present.
void split_long(const std::string &arg, std::string *name, std::string *value,
                bool *has_value) {
    size_t eq = arg.find('=');
    *has_value = eq != std::string::npos;
    *name = arg.substr(0, eq);
    *value = *has_value ? arg.substr(eq + 1) : std::string();
}

} // namespace

std::string usage_text() {
    return "usage: p2prun -n N [options] [--] program [args...]\n"
           "Starts N ranks of program on this machine with the environment of\n"
           "the ucxp2p TCP bootstrap (RANK, WORLD_SIZE, LOCAL_RANK,\n"
           "LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, P2P_MASTER_PORT, P2P_JOB_TOKEN,\n"
           "P2P_BOOTSTRAP=tcp, P2P_IF_IP=127.0.0.1; an inherited P2P_IFNAME is\n"
           "removed), and a second free port as MASTER_PORT for PyTorch code.\n"
           "options:\n"
           "  -n, --np, -np N       number of ranks (1.." +
           std::to_string(kMaxRanks) +
           ")\n"
           "  -x NAME=VALUE         add NAME=VALUE to every rank's environment\n"
           "  -x NAME               pass p2prun's own value of NAME\n"
           "  --master-port P       rendezvous port, P2P_MASTER_PORT (default: a free one)\n"
           "  --timeout SEC         kill all ranks after SEC seconds (exit 124); also\n"
           "                        ends the wait for a reader of p2prun's output\n"
           "  --grace SEC           delay between SIGTERM and SIGKILL (default 3)\n"
           "  --keep-going          do not kill the others when a rank fails\n"
           "  --no-prefix           do not prefix output lines with [rank]\n"
           "  -h, --help            print this help\n"
           "exit status: 0 when all ranks exit 0, else that of the first rank\n"
           "to fail (128+signal when killed; of ranks found ended together, a\n"
           "crash before an error exit), 124 on timeout, 127 when the\n"
           "program cannot be run, 2 on usage errors; a signal that ends the job\n"
           "ends p2prun too, once the ranks are gone (128+signal in a shell).\n"
           "signals: INT, TERM, HUP, ALRM and QUIT are forwarded to the ranks and\n"
           "end the job (QUIT is followed by TERM); USR1 and USR2 are forwarded only;\n"
           "TSTP (Ctrl-Z) stops the ranks with p2prun, which resumes them when continued.\n"
           "stdout closed by its reader (| head) while ranks run ends the job (SIGPIPE).\n";
}

ParseResult parse_options(int argc, const char *const *argv, Options *opts,
                          std::string *error) {
    Options o;
    bool have_n = false;
    int i = 1;
    // Fetches the value of an option: the text after '=' or the next argument.
    auto take_value = [&](const std::string &opt, bool inline_given,
                          const std::string &inline_value,
                          std::string *value) -> bool {
        if (inline_given) {
            *value = inline_value;
            return true;
        }
        if (i + 1 >= argc) {
            *error = "option '" + opt + "' needs a value";
            return false;
        }
        *value = argv[++i];
        return true;
    };

    for (; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "--") {
            ++i;
            break;
        }
        if (arg.empty() || arg[0] != '-' || arg == "-") {
            break;  // the program
        }
        std::string name, value;
        bool has_value = false;
        if (arg.compare(0, 2, "--") == 0) {
            split_long(arg, &name, &value, &has_value);
        } else if (arg == "-np") {
            name = arg;  // mpirun's spelling; as "-n" + "p" it was a bad count
        } else {
            // Short option: "-n4" is "-n" with value "4".
            name = arg.substr(0, 2);
            has_value = arg.size() > 2;
            value = has_value ? arg.substr(2) : std::string();
        }

        if (name == "-h" || name == "--help") {
            if (has_value) {
                *error = "option '" + name + "' takes no value";
                return ParseResult::kError;
            }
            return ParseResult::kHelp;
        } else if (name == "-n" || name == "--np" || name == "-np") {
            if (!take_value(name, has_value, value, &value)) {
                return ParseResult::kError;
            }
            long n = 0;
            if (!parse_int(value, 1, kMaxRanks, &n)) {
                *error = "invalid number of ranks '" + value + "' (expected 1.." +
                         std::to_string(kMaxRanks) + ")";
                return ParseResult::kError;
            }
            o.nranks = static_cast<int>(n);
            have_n = true;
        } else if (name == "-x") {
            if (!take_value(name, has_value, value, &value)) {
                return ParseResult::kError;
            }
            size_t eq = value.find('=');
            std::string var = value.substr(0, eq);
            if (!valid_env_name(var)) {
                *error = "invalid environment variable name in '-x " + value + "'";
                return ParseResult::kError;
            }
            if (eq != std::string::npos) {
                o.env.emplace_back(var, value.substr(eq + 1));
            } else {
                const char *cur = std::getenv(var.c_str());
                if (cur == nullptr) {
                    *error = "'-x " + var + "': " + var + " is not set";
                    return ParseResult::kError;
                }
                o.env.emplace_back(var, cur);
            }
        } else if (name == "--master-port") {
            if (!take_value(name, has_value, value, &value)) {
                return ParseResult::kError;
            }
            long p = 0;
            if (!parse_int(value, 1, 65535, &p)) {
                *error = "invalid port '" + value + "' (expected 1..65535)";
                return ParseResult::kError;
            }
            o.master_port = static_cast<int>(p);
        } else if (name == "--timeout" || name == "--grace") {
            if (!take_value(name, has_value, value, &value)) {
                return ParseResult::kError;
            }
            double s = 0;
            bool ok = parse_seconds(value, &s) && (name == "--grace" || s > 0);
            if (!ok) {
                *error = "invalid number of seconds '" + value + "' for '" + name + "'";
                return ParseResult::kError;
            }
            if (name == "--timeout") {
                o.timeout_s = s;
            } else {
                o.grace_s = s;
            }
        } else if (name == "--keep-going" || name == "--no-prefix") {
            if (has_value) {
                *error = "option '" + name + "' takes no value";
                return ParseResult::kError;
            }
            if (name == "--keep-going") {
                o.keep_going = true;
            } else {
                o.prefix = false;
            }
        } else {
            *error = "unknown option '" + arg + "'";
            return ParseResult::kError;
        }
    }

    if (!have_n) {
        *error = "missing number of ranks (-n N)";
        return ParseResult::kError;
    }
    if (i >= argc) {
        *error = "missing program to run";
        return ParseResult::kError;
    }
    for (; i < argc; ++i) {
        o.argv.emplace_back(argv[i]);
    }
    *opts = std::move(o);
    return ParseResult::kRun;
}

} // namespace p2prun
