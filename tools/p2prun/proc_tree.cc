#include "proc_tree.h"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>

namespace p2prun {

namespace {

// Fields of /proc/PID/stat: "pid (comm) state ppid pgrp ..."; comm may hold
// spaces and parentheses, so parsing starts after the last ')'.
bool read_stat(pid_t pid, ProcEntry *e) {
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
    FILE *f = std::fopen(path, "re");
    if (f == nullptr) {
        return false;  // ended meanwhile
    }
    char buf[1024];
    size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    std::string stat(buf, n);
    size_t close = stat.rfind(')');
    int ppid = 0, pgrp = 0;
    char state = 0;
    if (close == std::string::npos ||
        std::sscanf(stat.c_str() + close + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) {
        return false;
    }
    *e = ProcEntry{pid, static_cast<pid_t>(ppid), static_cast<pid_t>(pgrp), state == 'Z'};
    return true;
}

} // namespace

std::vector<ProcEntry> list_descendants() {
    std::unordered_map<pid_t, std::vector<ProcEntry>> children;
    DIR *d = ::opendir("/proc");
    if (d == nullptr) {
        return {};
    }
    while (struct dirent *ent = ::readdir(d)) {
        char *end = nullptr;
        long pid = std::strtol(ent->d_name, &end, 10);
        ProcEntry e;
        if (pid > 0 && *end == '\0' && read_stat(static_cast<pid_t>(pid), &e)) {
            children[e.ppid].push_back(e);
        }
    }
    ::closedir(d);
    std::vector<ProcEntry> out;
    std::vector<pid_t> todo{::getpid()};
    while (!todo.empty()) {
        pid_t parent = todo.back();
        todo.pop_back();
        auto it = children.find(parent);
        if (it == children.end()) {
            continue;
        }
        for (const ProcEntry &c : it->second) {
            out.push_back(c);
            todo.push_back(c.pid);
        }
        children.erase(it);  // a pid seen twice (reused meanwhile) is walked once
    }
    return out;
}

size_t kill_descendants(int rounds) {
    const pid_t self = ::getpid();
    std::vector<ProcEntry> left = list_descendants();
    for (int round = 0; round < rounds && !left.empty(); ++round) {
        for (const ProcEntry &e : left) {
            if (e.ppid == self) {
                ::kill(e.pid, SIGKILL);
            }
        }
        int status = 0;
        pid_t pid;
        while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0 || (pid < 0 && errno == EINTR)) {
        }
        left = list_descendants();
        if (!left.empty()) {
            ::usleep(10000);
        }
    }
    return left.size();
}

std::set<pid_t> groups_with_members(const std::vector<ProcEntry> &procs) {
    std::set<pid_t> groups;
    for (const ProcEntry &e : procs) {
        if (e.pid != e.pgrp && !e.zombie) {
            groups.insert(e.pgrp);
        }
    }
    return groups;
}

} // namespace p2prun
