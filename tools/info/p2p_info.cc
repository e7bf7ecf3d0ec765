/*
 * p2p_info: what ucxp2p was built with, what UCX and the machine offer, and
 * which NICs each local rank will use and why. Uses only the public API.
 *
 *   p2p_info                          this machine
 *   p2p_info --topology p4d.xml --local-size 8
 *                                     preview the plan of another machine
 */
#include <ucxp2p/p2p.h>
#include <ucxp2p/p2p_topo.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <sys/stat.h>

namespace {

const char kUsage[] =
    "usage: p2p_info [options]\n"
    "Show the ucxp2p build, UCX transports, the machine topology, the rail\n"
    "plan of every local rank, RoCE GID choice and the P2P_* settings.\n"
    "\n"
    "  --topology FILE.xml  plan for the machine described by an hwloc XML\n"
    "                       file (lstopo --of xml) instead of this one\n"
    "  --local-size N       number of ranks per host (default: LOCAL_WORLD_SIZE,\n"
    "                       else the number of GPUs, else 1)\n"
    "  --local-rank R       show only local rank R\n"
    "  --sysfs DIR          read RoCE GIDs from DIR instead of\n"
    "                       /sys/class/infiniband (none with --topology)\n"
    "  --no-ucx             do not start UCX (to list its transports, and to\n"
    "                       check the context's P2P_* values with a context)\n"
    "  --no-config          do not print (nor check) the P2P_* configuration\n"
    "  -h, --help           this text\n"
    "Exit status: 0 ok, 1 runtime failure, 2 bad arguments.\n";

struct Options {
    std::string topology;
    long local_size = -1;
    long local_rank = -1;
    std::string sysfs;
    bool sysfs_set = false;
    bool ucx = true;
    bool config = true;
};

bool parse_num(const char *s, long max, long *out) {
    if (s == nullptr || *s == '\0' || *s == '-' || *s == '+') {
        return false;
    }
    errno = 0;
    char *end = nullptr;
    long v = std::strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0 || v > max) {
        return false;
    }
    *out = v;
    return true;
}

int usage_error(const char *fmt, const char *arg) {
    std::fprintf(stderr, "p2p_info: ");
    std::fprintf(stderr, fmt, arg);
    std::fprintf(stderr, "\nTry 'p2p_info --help'.\n");
    return 2;
}

/** 0 ok, 2 bad arguments, -1 help printed. */
int parse(int argc, char **argv, Options *o) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&](const char **v) {
            if (i + 1 >= argc) {
                return false;
            }
            *v = argv[++i];
            return true;
        };
        const char *v = nullptr;
        if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            return -1;
        } else if (a == "--topology") {
            if (!value(&v) || *v == '\0') {
                return usage_error("%s needs a file name", a.c_str());
            }
            o->topology = v;
        } else if (a == "--local-size") {
            if (!value(&v) || !parse_num(v, 4096, &o->local_size) ||
                o->local_size == 0) {
                return usage_error("--local-size needs a number in [1, 4096], got '%s'",
                                   v != nullptr ? v : "");
            }
        } else if (a == "--local-rank") {
            if (!value(&v) || !parse_num(v, 4095, &o->local_rank)) {
                return usage_error("--local-rank needs a number in [0, 4095], got '%s'",
                                   v != nullptr ? v : "");
            }
        } else if (a == "--sysfs") {
            struct stat st;
            if (!value(&v) || stat(v, &st) != 0 || !S_ISDIR(st.st_mode)) {
                return usage_error("--sysfs needs a directory, got '%s'", v != nullptr ? v : "");
            }
            o->sysfs = v;
            o->sysfs_set = true;
        } else if (a == "--no-ucx") {
            o->ucx = false;
        } else if (a == "--no-config") {
            o->config = false;
        } else {
            return usage_error("unknown argument '%s'", a.c_str());
        }
    }
    return 0;
}

long env_local_size() {
    for (const char *name : {"P2P_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE"}) {
        const char *s = std::getenv(name);
        long v;
        if (parse_num(s, 4096, &v) && v > 0) {
            return v;
        }
        if (s != nullptr) {
            std::fprintf(stderr, "p2p_info: %s='%s' is not a number in [1, 4096]; "
                         "ignored\n", name, s);
        }
    }
    return -1;
}

/** Whether p2p_context_create takes the P2P_* values as they are (it
 *  reads and checks those of the context, not the bootstrap's; its error
 *  log names a refused one): printing them checks nothing. A context
 *  starts UCX: not with --no-ucx. */
void check_values(const Options &o, int *exit_code) {
    if (!o.ucx) {
        std::printf("# values not checked (--no-ucx: checking starts a context)\n");
        return;
    }
    std::fflush(stdout);  // the library's error log goes to stderr
    p2p_context_h ctx = nullptr;
    const p2p_status_t st = p2p_context_create(nullptr, &ctx);
    if (st == P2P_OK) {
        p2p_context_destroy(ctx);
        std::printf("# values accepted by p2p_context_create (it checks the context's "
                    "settings; p2p_bootstrap_create checks the bootstrap's)\n");
    } else if (st == P2P_ERR_INVALID_PARAM) {
        std::printf("# values refused by p2p_context_create: %s (its error above "
                    "names the variable)\n", p2p_status_string(st));
        *exit_code = 1;
    } else {
        std::printf("# values not checked: p2p_context_create failed: %s\n",
                    p2p_status_string(st));
        *exit_code = 1;
    }
}

} // namespace

int main(int argc, char **argv) {
    Options o;
    int rc = parse(argc, argv, &o);
    if (rc != 0) {
        return rc < 0 ? 0 : rc;
    }
    // The topology first: a usage error it reveals (a topology file that
    // does not load, --local-rank past the local size) ends the run before
    // anything is printed.
    p2p_topo_h topo = nullptr;
    p2p_status_t topo_st = p2p_topo_load(o.topology.empty() ? nullptr : o.topology.c_str(),
                                         &topo);
    long size = 1;
    if (topo_st != P2P_OK && !o.topology.empty()) {
        std::fprintf(stderr, "p2p_info: cannot load topology '%s': %s\n",
                     o.topology.c_str(), p2p_status_string(topo_st));
        return 2;
    }
    if (topo_st == P2P_OK) {
        if (o.sysfs_set) {
            p2p_topo_set_sysfs(topo, o.sysfs.c_str());
        }
        p2p_topo_info_t info{};
        p2p_topo_query(topo, &info);
        size = o.local_size > 0 ? o.local_size
               : o.topology.empty() && env_local_size() > 0 ? env_local_size()
               : info.num_gpus > 0 ? static_cast<long>(info.num_gpus) : 1;
        if (o.local_rank >= size) {
            std::fprintf(stderr, "p2p_info: --local-rank %ld is not below the local "
                         "size %ld\n", o.local_rank, size);
            p2p_topo_destroy(topo);
            return 2;
        }
    }

    std::printf("== build\n");
    p2p_build_print(stdout);

    int exit_code = 0;
    std::printf("\n== ucx\n");
    if (o.ucx) {
        std::fflush(stdout);
        p2p_status_t st = p2p_ucx_print(stdout);
        if (st != P2P_OK) {
            std::printf("ucx could not start: %s\n", p2p_status_string(st));
            exit_code = 1;
        }
    } else {
        std::printf("(skipped: --no-ucx)\n");
    }

    std::printf("\n== topology\n");
    if (topo_st != P2P_OK) {
        std::printf("cannot load the live topology: %s\n", p2p_status_string(topo_st));
        exit_code = 1;
    } else {
        p2p_topo_print(topo, stdout);
        std::printf("\n== rail plan (%ld local rank%s)\n", size, size == 1 ? "" : "s");
        for (long r = 0; r < size; ++r) {
            if (o.local_rank >= 0 && r != o.local_rank) {
                continue;
            }
            p2p_status_t st = p2p_topo_plan_print(topo, static_cast<uint32_t>(r),
                                                  static_cast<uint32_t>(size), stdout);
            if (st != P2P_OK) {
                std::printf("local rank %ld: no plan: %s (see the log above; check "
                            "P2P_RAILS / P2P_IB_GID_INDEX)\n", r, p2p_status_string(st));
                exit_code = 1;
                break;
            }
        }
        p2p_topo_destroy(topo);
    }

    std::printf("\n== roce\n");
    if (!o.topology.empty() && !o.sysfs_set) {
        std::printf("(skipped: previewing %s; use --sysfs DIR)\n", o.topology.c_str());
    } else {
        p2p_roce_print(o.sysfs_set ? o.sysfs.c_str() : nullptr, stdout);
    }

    if (o.config) {
        std::printf("\n== configuration\n");
        p2p_config_print(stdout);
        check_values(o, &exit_code);
    }
    return exit_code;
}
