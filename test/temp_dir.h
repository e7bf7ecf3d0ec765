/* Test helper: a temporary directory, removed with everything in it. */
#ifndef UCXP2P_TEST_TEMP_DIR_H
#define UCXP2P_TEST_TEMP_DIR_H

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

#include <stdlib.h>

namespace p2ptest {

/** A temporary directory removed with everything in it. */
class TempDir {
public:
    TempDir() {
        std::string tmpl = std::filesystem::temp_directory_path().string() +
                           "/p2p-test-XXXXXX";
        char *p = mkdtemp(&tmpl[0]);
        if (p != nullptr) {
            path_ = p;
        }
    }
    ~TempDir() {
        std::error_code ec;
        if (!path_.empty()) {
            std::filesystem::remove_all(path_, ec);
        }
    }
    TempDir(const TempDir &) = delete;
    TempDir &operator=(const TempDir &) = delete;
    const std::string &path() const { return path_; }

    /** Write content (a newline is added) to a file below the directory. */
    void write(const std::string &rel, const std::string &content) const {
        std::filesystem::path p = std::filesystem::path(path_) / rel;
        std::filesystem::create_directories(p.parent_path());
        std::ofstream(p) << content << "\n";
    }
    /** The path of rel below the directory. */
    std::string file(const std::string &rel) const {
        return (std::filesystem::path(path_) / rel).string();
    }
    /** The contents of a file below the directory ("" when missing). */
    std::string read(const std::string &rel) const {
        std::ifstream in(file(rel), std::ios::binary);
        std::ostringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }
    void mkdir(const std::string &rel) const {
        std::filesystem::create_directories(std::filesystem::path(path_) / rel);
    }

private:
    std::string path_;
};

} // namespace p2ptest

#endif
