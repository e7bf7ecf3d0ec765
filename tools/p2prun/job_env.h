// p2prun: the environment each rank gets (torchrun-style bootstrap variables).
#ifndef P2PRUN_JOB_ENV_H
#define P2PRUN_JOB_ENV_H

#include <string>
#include <utility>
#include <vector>

namespace p2prun {

// Values shared by all ranks of one run.
struct JobInfo {
    int world_size = 0;
    int master_port = 0;    // rank 0's rendezvous port: P2P_MASTER_PORT
    int store_port = 0;     // MASTER_PORT, for PyTorch's store in the ranks
    std::string job_token;  // 32 lowercase hex digits
};

// A port rank 0 can listen on: a random bindable one in 10000-19999 and
// below the kernel's ephemeral range (so no port-0 bind or connect
// elsewhere can take it before rank 0 listens), else one the kernel picks
// for 127.0.0.1:0; 0 (with *error set) on failure.
int pick_free_loopback_port(std::string *error);

// 128 random bits from /dev/urandom as 32 hex digits; empty (with *error
// set) on failure.
std::string make_job_token(std::string *error);

// The environment of rank `rank`: p2prun's own environment without inherited
// bootstrap overrides (P2P_RANK, P2P_MASTER_PORT, P2P_IFNAME, ...), plus the
// bootstrap variables (with P2P_IF_IP=127.0.0.1, the MASTER_ADDR), plus the
// user's -x variables (which win). Returns "NAME=VALUE" strings.
std::vector<std::string> rank_environment(
    const char *const *base_env, const JobInfo &job, int rank,
    const std::vector<std::pair<std::string, std::string>> &extra);

} // namespace p2prun

#endif
